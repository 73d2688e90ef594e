/**
 * The EGS sidebar (``egs-sidebar``): a ReactWidget redrawn from the model's
 * ``changed`` signal, with a clock for countdowns while it is shown.
 */
import { ReactWidget, UseSignal } from '@jupyterlab/apputils';
import { Message } from '@lumino/messaging';
import * as React from 'react';

import { EndpointList } from './endpoints';
import { formatClock } from './format';
import { GpuList } from './gpulist';
import { useNow } from './hooks';
import { gpuIcon } from './icon';
import { EgsModel, IEgsState } from './model';
import { IPanelNotice } from './notice';
import { RequestForm } from './requestform';
import { SliceCard } from './slices';
import { sliceViews } from './state';

export const SIDEBAR_ID = 'egs-sidebar';

function Sidebar({ model, state }: { model: EgsModel; state: IEgsState }): JSX.Element {
  const now = useNow(1000);
  const [notice, setNotice] = React.useState<IPanelNotice | null>(null);
  const views = sliceViews(state.slices, state.gprs);
  const gpus = state.gpus?.gpus ?? [];
  const loaded = state.updatedAt !== null;
  return (
    <div className="egs-Panel">
      <header className="egs-Header">
        <h2>EGS GPUs</h2>
        <button type="button" className="jp-mod-styled egs-Button" onClick={() => void model.refresh()}>
          Refresh
        </button>
      </header>
      <p className="egs-Muted egs-Updated" aria-live="polite">
        {state.config?.user ? `${state.config.user} · ` : ''}
        {loaded
          ? `updated ${formatClock(new Date(state.updatedAt!).toISOString(), now)}`
          : state.error
            ? 'not loaded'
            : 'loading…'}
        {` · every ${model.settings.refreshInterval} s`}
      </p>
      {state.error && (
        <p className="egs-Error egs-Banner" role="alert">
          {loaded ? 'Could not refresh: ' : ''}
          {state.error}
        </p>
      )}
      {notice && (
        <p className={notice.error ? 'egs-Error egs-Banner' : 'egs-Banner'} role={notice.error ? 'alert' : 'status'}>
          {notice.text}
          <button type="button" className="egs-Dismiss" aria-label="Dismiss message" onClick={() => setNotice(null)}>
            ×
          </button>
        </p>
      )}
      {loaded && (
        <>
          <h2 className="egs-Section">My workspaces</h2>
          {views.length ? (
            views.map(view => (
              <SliceCard
                key={view.slice.name}
                view={view}
                events={state.events}
                gpus={gpus}
                checks={state.checks}
                now={now}
                model={model}
                show={setNotice}
              />
            ))
          ) : (
            <p className="egs-Muted">You are not in a workspace yet: ask an admin to add you to one.</p>
          )}
          <h2 className="egs-Section" id="egs-request-heading">
            New request
          </h2>
          <RequestForm model={model} state={state} now={now} show={setNotice} />
          <h2 className="egs-Section">GPUs of my workspaces</h2>
          <GpuList state={state} />
          <h2 className="egs-Section">My endpoints</h2>
          <EndpointList endpoints={state.endpoints} now={now} />
        </>
      )}
    </div>
  );
}

export class EgsSidebar extends ReactWidget {
  constructor(private readonly model: EgsModel) {
    super();
    this.id = SIDEBAR_ID;
    this.title.icon = gpuIcon;
    this.title.caption = 'EGS GPUs';
    this.addClass('egs-Sidebar');
  }

  protected onAfterShow(msg: Message): void {
    super.onAfterShow(msg);
    this.model.showMetrics = true;
  }

  protected onAfterHide(msg: Message): void {
    super.onAfterHide(msg);
    this.model.showMetrics = false;
  }

  render(): JSX.Element {
    return (
      <UseSignal signal={this.model.changed} initialArgs={this.model.state}>
        {(_, state) => <Sidebar model={this.model} state={state ?? this.model.state} />}
      </UseSignal>
    );
  }
}
