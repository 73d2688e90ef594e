/**
 * A GPR's checklist as the sidebar shows it: which GPRs have one worth asking for, when an answer
 * is still good, and the text of each check (its chip, its tooltip, one line of details). Pure: no
 * I/O, no clock.
 *
 * Vocabulary (the EGS API): a *check run* is one check of a cluster's checklist on one node, at a
 * GPR's *entry* (before its nodes are bound) or *exit* (after they are returned); it is *active*
 * while pending or running.
 */
import { formatSpan } from './format';
import { CheckStatus, GprStatus, ICheckRun, IGpr } from './tokens';

/** The statuses of a GPR that holds or held nodes: only these can have check runs. */
export const CHECKED: readonly GprStatus[] = ['provisioning', 'provisioned', 'releasing', 'complete', 'failed'];

export const STATUS_MARK: { [status in CheckStatus]: string } = {
  pending: '…',
  running: '⟳',
  passed: '✓',
  failed: '✗',
  skipped: '–'
};

export const isActive = (run: ICheckRun): boolean => run.status === 'pending' || run.status === 'running';

/** What a GPR's answer was asked with: a new status or update asks again. */
export const checksKey = (gpr: IGpr): string => `${gpr.status} ${gpr.updated_at ?? ''}`;

/**
 * The GPRs whose checklist to ask for now, of the ``shown`` ones: those that hold or held nodes
 * whose last answer (asked with ``askedWith[id]``, see checksKey) is missing, older than the GPR's
 * status or update, or still has an active check.
 */
export function checksToAsk(
  shown: IGpr[],
  known: { [id: number]: ICheckRun[] },
  askedWith: { [id: number]: string }
): IGpr[] {
  return shown.filter(
    gpr =>
      CHECKED.includes(gpr.status) &&
      (known[gpr.id] === undefined || askedWith[gpr.id] !== checksKey(gpr) || known[gpr.id].some(isActive))
  );
}

/** How long a check ran: ``0.42 s``, ``2m05s``; ``running…`` while active; empty when it never ran. */
export function checkDuration(run: ICheckRun): string {
  if (run.duration === null) {
    return isActive(run) ? `${run.status}…` : '';
  }
  return run.duration < 60 ? `${run.duration.toFixed(2)} s` : formatSpan(run.duration, true);
}

/** ``max_temperature_c=61, xid=0``, in the order the service gave. */
export function checkValues(run: ICheckRun): string {
  return Object.entries(run.values)
    .map(([name, value]) => `${name}=${value}`)
    .join(', ');
}

/** The chip's label: the check and its phase, with the node when the GPR has several. */
export function checkLabel(run: ICheckRun, manyNodes: boolean): string {
  return `${manyNodes ? `${run.node} ` : ''}${run.name} ${run.phase}`;
}

/** One line about a check: where, what, its status, how long and what it measured. */
export function checkLine(run: ICheckRun): string {
  return [`${run.name} at ${run.phase} on ${run.node}: ${run.status}`, checkDuration(run), checkValues(run)]
    .filter(Boolean)
    .join(' · ');
}

/** The tooltip of a check's chip: its line, then its log. */
export function checkTooltip(run: ICheckRun): string {
  return run.log ? `${checkLine(run)}\n${run.log}` : checkLine(run);
}

/** ``1 failed, 2 passed``: how many checks have each status, failed first. */
export function checksSummary(runs: ICheckRun[]): string {
  const order: CheckStatus[] = ['failed', 'running', 'pending', 'passed', 'skipped'];
  return order
    .map(status => [status, runs.filter(r => r.status === status).length] as const)
    .filter(([, count]) => count > 0)
    .map(([status, count]) => `${count} ${status}`)
    .join(', ');
}
