/**
 * The "My workspaces" section: per slice its held GPUs (with Release), its queue (with Cancel) and
 * recent history; a GPR that holds or held nodes shows its checklist.
 */
import * as React from 'react';

import { CheckList } from './checklist';
import { formatClock, formatSpan, plural } from './format';
import { EgsModel } from './model';
import { IPanelNotice, runAction, ShowNotice } from './notice';
import { askedFor, gpuCount, heldModel, ISliceView, whenText } from './state';
import { ICheckRun, IEvent, IGpr, IGpu, ISlice } from './tokens';

interface IGprProps {
  gpr: IGpr;
  gpus: IGpu[];
  /** Its checklist; undefined: not asked for (yet). */
  checks: ICheckRun[] | undefined;
  now: number;
  model: EgsModel;
  show: ShowNotice;
}

function gprTitle(gpr: IGpr, gpus: IGpu[]): string {
  const model = heldModel(gpr, gpus) ?? gpr.shape;
  const parts = [`GPR ${gpr.id}`, askedFor(gpr), model ?? 'any shape', `${formatSpan(gpr.duration)}`, `p${gpr.priority}`];
  if (gpr.name) {
    parts.splice(1, 0, gpr.name);
  }
  return parts.join(' · ');
}

function boundText(gpr: IGpr, gpus: IGpu[]): string | null {
  if (!gpr.bound_gpus.length) {
    return null;
  }
  const model = heldModel(gpr, gpus);
  const count = gpuCount(gpr) ?? 0;
  const what = model ? `${count} x ${model}` : plural(count, 'GPU');
  return gpr.bound_nodes.length ? `${what} on ${gpr.bound_nodes.join(', ')}` : what;
}

function GprItem({ gpr, gpus, checks, now, model, show }: IGprProps): JSX.Element {
  const [busy, setBusy] = React.useState(false);
  const id = `egs-gpr-${gpr.id}`;
  const act = (action: () => Promise<string>) => {
    setBusy(true);
    void runAction(show, action).finally(() => setBusy(false));
  };
  const release = () =>
    act(async () => {
      const answer = await model.release(gpr.id);
      return `GPR ${answer.id} is ${answer.status}: its GPUs go back.`;
    });
  const cancel = () =>
    act(async () => {
      const answer = await model.cancel(gpr.id);
      return `GPR ${answer.id} is ${answer.status}.`;
    });
  const holds = gpr.status === 'provisioned' || gpr.status === 'provisioning';
  const waits = gpr.status === 'queued' || gpr.status === 'pending-approval';
  const bound = boundText(gpr, gpus);
  return (
    <li className="egs-Gpr" data-gpr-id={gpr.id} data-status={gpr.status}>
      <div id={id} className="egs-Gpr-summary">
        <span className="egs-Gpr-title">{gprTitle(gpr, gpus)}</span>
        <span className={`egs-Status egs-Status-${gpr.status}`}>{gpr.status}</span>
        {bound && <div className="egs-Gpr-bound">{bound}</div>}
        <div className="egs-Gpr-when">{whenText(gpr, now)}</div>
        {checks && <CheckList gpr={gpr.id} runs={checks} />}
      </div>
      {holds && (
        <button
          type="button"
          className="jp-mod-styled jp-mod-warn egs-Button"
          aria-describedby={id}
          disabled={busy}
          onClick={release}
        >
          Release
        </button>
      )}
      {waits && (
        <button type="button" className="jp-mod-styled egs-Button" aria-describedby={id} disabled={busy} onClick={cancel}>
          Cancel
        </button>
      )}
    </li>
  );
}

function limitsText(slice: ISlice): string {
  const parts = [
    slice.quota.max_gpus ? `max ${plural(slice.quota.max_gpus, 'GPU')} at once` : 'no GPU quota',
    slice.policy.max_duration ? `max ${formatSpan(slice.policy.max_duration)} per request` : null,
    `priority up to ${slice.policy.max_priority}`,
    slice.quota.max_gpu_hours
      ? `${slice.usage.gpu_hours_week.toFixed(1)} of ${slice.quota.max_gpu_hours} GPU-hours this week`
      : `${slice.usage.gpu_hours_week.toFixed(1)} GPU-hours this week`
  ];
  return parts.filter(Boolean).join(' · ');
}

interface ISliceProps {
  view: ISliceView;
  events: IEvent[];
  gpus: IGpu[];
  checks: { [gpr: number]: ICheckRun[] };
  now: number;
  model: EgsModel;
  show: (notice: IPanelNotice | null) => void;
}

export function SliceCard({ view, events, gpus, checks, now, model, show }: ISliceProps): JSX.Element {
  const { slice, holding, waiting, history } = view;
  const recent = events.filter(e => e.slice === slice.name).slice(-5).reverse();
  const item = (gpr: IGpr) => (
    <GprItem key={gpr.id} gpr={gpr} gpus={gpus} checks={checks[gpr.id]} now={now} model={model} show={show} />
  );
  return (
    <section className="egs-Slice" data-slice={slice.name}>
      <h3>
        {slice.display_name || slice.name} {slice.display_name && <span className="egs-Muted">({slice.name})</span>}
      </h3>
      <p className="egs-Muted">{limitsText(slice)}</p>
      <h4>Provisioned</h4>
      {holding.length ? <ul className="egs-List">{holding.map(item)}</ul> : <p className="egs-Muted">No GPUs held now.</p>}
      <h4>Queued</h4>
      {waiting.length ? <ul className="egs-List">{waiting.map(item)}</ul> : <p className="egs-Muted">Nothing waiting.</p>}
      {history.length > 0 && (
        <details className="egs-History">
          <summary>Recent history</summary>
          <ul className="egs-List">{history.map(item)}</ul>
          {recent.length > 0 && (
            <ul className="egs-Events">
              {recent.map(e => (
                <li key={e.id}>
                  {formatClock(e.time, now)} · GPR {e.gpr ?? '–'} {e.kind}
                  {e.reason ? `: ${e.reason}` : ''}
                </li>
              ))}
            </ul>
          )}
        </details>
      )}
    </section>
  );
}
