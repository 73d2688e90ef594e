/**
 * The status bar item (``egs-status``): ``2 x H100 · 1h12m left``, ``queued #3 · starts ~14:20``
 * or ``no GPUs`` for the user's own GPRs; nothing until the service answered. A click opens the sidebar.
 */
import { ReactWidget, UseSignal } from '@jupyterlab/apputils';
import * as React from 'react';

import { useNow } from './hooks';
import { gpuIcon } from './icon';
import { EgsModel, IEgsState } from './model';
import { ownGprs, statusText } from './state';

export const STATUS_ID = 'egs-status';

function StatusText({ state, open }: { state: IEgsState; open: () => void }): JSX.Element | null {
  const now = useNow(5000);
  if (state.updatedAt === null) {
    return null;
  }
  const text = statusText(ownGprs(state.gprs, state.config?.user ?? null), state.gpus?.gpus ?? [], now);
  return (
    <button type="button" className="egs-StatusButton" title="EGS GPUs: open the sidebar" onClick={open}>
      <gpuIcon.react tag="span" className="egs-StatusIcon" />
      <span>{text}</span>
    </button>
  );
}

export class EgsStatus extends ReactWidget {
  constructor(
    private readonly model: EgsModel,
    private readonly open: () => void
  ) {
    super();
    this.id = STATUS_ID;
    this.addClass('egs-Status-item');
  }

  render(): JSX.Element {
    return (
      <UseSignal signal={this.model.changed} initialArgs={this.model.state}>
        {(_, state) => <StatusText state={state ?? this.model.state} open={this.open} />}
      </UseSignal>
    );
  }
}
