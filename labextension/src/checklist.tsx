/** A GPR's checklist on its card: one chip per check with its status (details and log on hover); a chip expands them below. */
import * as React from 'react';

import { checkLabel, checkLine, checksSummary, checkTooltip, STATUS_MARK } from './checks';
import { ICheckRun } from './tokens';

export function CheckList({ gpr, runs }: { gpr: number; runs: ICheckRun[] }): JSX.Element | null {
  const [open, setOpen] = React.useState<number | null>(null);
  if (!runs.length) {
    return null;
  }
  const manyNodes = new Set(runs.map(r => r.node)).size > 1;
  const shown = runs.find(r => r.id === open) ?? null;
  const detailId = `egs-gpr-${gpr}-check`;
  return (
    <div className="egs-Checks" aria-label={`Checks of GPR ${gpr}: ${checksSummary(runs)}`} role="group">
      <span className="egs-Checks-title">Checks</span>
      {runs.map(run => (
        <button
          key={run.id}
          type="button"
          className={`egs-Check egs-Check-${run.status}`}
          data-check={`${run.name}/${run.phase}`}
          data-status={run.status}
          title={checkTooltip(run)}
          aria-label={`${checkLabel(run, manyNodes)}: ${run.status}`}
          aria-expanded={run.id === open}
          aria-controls={detailId}
          onClick={() => setOpen(run.id === open ? null : run.id)}
        >
          <span aria-hidden="true">{STATUS_MARK[run.status]}</span> {checkLabel(run, manyNodes)}
        </button>
      ))}
      {shown && (
        <div className="egs-CheckDetail" id={detailId}>
          <div>{checkLine(shown)}</div>
          {shown.log ? <pre className="egs-CheckLog">{shown.log}</pre> : <div className="egs-Muted">No log.</div>}
        </div>
      )}
    </div>
  );
}
