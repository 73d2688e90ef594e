/**
 * The request form: workspace, an optional GPR template that fills the rest, GPUs or
 * nodes, duration, shape, priority within the slice's policy, optional start; "Get
 * wait times" shows every shape/cluster that could serve it with its estimated start
 * and cost; picking a row and pressing "Request GPUs" submits the GPR.
 */
import * as React from 'react';

import { formatClock, formatSpan } from './format';
import { EgsModel, IEgsState } from './model';
import { ShowNotice } from './notice';
import {
  applyTemplate,
  COUNT_LABELS,
  EMPTY_FORM,
  formatMoney,
  FormError,
  IRequestForm,
  optionKey,
  pickedOption,
  pickOption,
  priorityChoices,
  requestBody,
  unitChoices,
  usableTemplates,
  waitTimesBody
} from './request';
import { IWaitTimes } from './tokens';

interface IProps {
  model: EgsModel;
  state: IEgsState;
  now: number;
  show: ShowNotice;
}

const UNIT_NAMES: Record<IRequestForm['unit'], string> = {
  gpus: 'single GPUs',
  nodes: 'whole nodes',
  share: 'a share of a GPU'
};
const SHARE = '0.25'; // what the count becomes when the form turns to a share

/** Fields whose change makes a wait-time answer stale. */
const ASKED: (keyof IRequestForm)[] = ['slice', 'template', 'unit', 'count', 'duration', 'priority', 'startAfter'];

export function RequestForm({ model, state, now, show }: IProps): JSX.Element {
  const defaultSlice = state.config?.slice ?? state.slices[0]?.name ?? '';
  const [form, setForm] = React.useState<IRequestForm>({ ...EMPTY_FORM, slice: defaultSlice });
  const [waits, setWaits] = React.useState<IWaitTimes | null>(null);
  const [formError, setFormError] = React.useState<FormError | null>(null);
  const [busy, setBusy] = React.useState(false);

  const sliceName = form.slice || defaultSlice;
  const slice = state.slices.find(s => s.name === sliceName);
  const templates = usableTemplates(state.templates, slice);
  const template = templates.find(t => t.name === form.template);
  const choices = priorityChoices(slice);
  const max = slice?.policy.max_priority ?? 300;
  if (template?.priority && template.priority <= max && !choices.some(c => c.value === template.priority)) {
    choices.push({ label: `template's (${template.priority})`, value: template.priority });
  }
  const priority =
    form.priority && choices.some(c => String(c.value) === form.priority)
      ? form.priority
      : String((choices.find(c => c.label.startsWith('medium')) ?? choices[choices.length - 1])?.value ?? '');
  const unit = unitChoices(slice).includes(form.unit) ? form.unit : 'gpus';
  const count = unit === form.unit ? form.count : '1';
  const current: IRequestForm = { ...form, slice: sliceName, template: template?.name ?? '', priority, unit, count };

  const set = (field: keyof IRequestForm) => (
    event: React.ChangeEvent<HTMLInputElement | HTMLSelectElement>
  ) => {
    const change: Partial<IRequestForm> = { [field]: event.target.value };
    if (field === 'shape') {
      change.cluster = '';
    }
    if (field === 'unit' && (event.target.value === 'share') !== (current.unit === 'share')) {
      change.count = event.target.value === 'share' ? SHARE : '1';
    }
    if (field === 'template') {
      setWaits(null);
      setFormError(null);
      setForm(applyTemplate(current, templates.find(t => t.name === event.target.value)));
      return;
    }
    if (ASKED.includes(field)) {
      setWaits(null);
    }
    setFormError(null);
    setForm({ ...current, ...change });
  };

  const guard = async (action: () => Promise<void>) => {
    setBusy(true);
    setFormError(null);
    try {
      await action();
    } catch (error) {
      if (error instanceof FormError) {
        setFormError(error);
      } else {
        show({ text: (error as Error).message, error: true });
      }
    } finally {
      setBusy(false);
    }
  };

  const getWaitTimes = () =>
    guard(async () => {
      const answer = await model.waitTimes(waitTimesBody(current, slice, Date.now()));
      setWaits(answer);
      const picked = pickedOption(current, answer.options) ?? answer.options[0];
      if (picked) {
        setForm(pickOption(current, picked));
      }
      show(answer.options.length ? null : { text: 'No shape on any cluster can serve this request.', error: true });
    });

  const submit = (event: React.FormEvent) => {
    event.preventDefault();
    void guard(async () => {
      const gpr = await model.request(requestBody(current, slice, Date.now()));
      const where =
        gpr.status === 'queued' && gpr.queue_position !== null
          ? ` (#${gpr.queue_position}${gpr.estimated_start ? `, starts ~${formatClock(gpr.estimated_start, Date.now())}` : ''})`
          : '';
      show({ text: `GPR ${gpr.id} is ${gpr.status}${where}.`, error: false });
      setWaits(null);
    });
  };

  const countLabel = COUNT_LABELS[current.unit];
  const shapeNames = [...new Set(state.shapes.map(s => s.name))];
  const invalid = (label: string) => (formError?.field === label ? { 'aria-invalid': true, 'aria-errormessage': 'egs-form-error' } : {});
  const picked = waits ? pickedOption(current, waits.options) : undefined;

  return (
    <form className="egs-Form" onSubmit={submit}>
      <div className="egs-Field">
        <label htmlFor="egs-slice">Workspace</label>
        <select id="egs-slice" className="jp-mod-styled" value={sliceName} onChange={set('slice')} {...invalid('Workspace')}>
          {state.slices.map(s => (
            <option key={s.name} value={s.name}>
              {s.display_name || s.name}
            </option>
          ))}
        </select>
      </div>
      {templates.length > 0 && (
        <div className="egs-Field">
          <label htmlFor="egs-template">Template</label>
          <select id="egs-template" className="jp-mod-styled" value={current.template} onChange={set('template')}>
            <option value="">none</option>
            {templates.map(t => (
              <option key={t.name} value={t.name}>
                {t.description ? `${t.name}: ${t.description}` : t.name}
              </option>
            ))}
          </select>
        </div>
      )}
      <div className="egs-Field">
        <label htmlFor="egs-unit">Ask for</label>
        <select id="egs-unit" className="jp-mod-styled" value={current.unit} onChange={set('unit')}>
          {unitChoices(slice).map(unit => (
            <option key={unit} value={unit}>
              {UNIT_NAMES[unit]}
            </option>
          ))}
        </select>
      </div>
      <div className="egs-Field">
        <label htmlFor="egs-count">{countLabel}</label>
        <input
          id="egs-count"
          className="jp-mod-styled"
          type="number"
          min={current.unit === 'share' ? 0.01 : 1}
          max={current.unit === 'share' ? 0.99 : undefined}
          step={current.unit === 'share' ? 0.01 : 1}
          value={current.count}
          onChange={set('count')}
          {...invalid(countLabel)}
        />
      </div>
      <div className="egs-Field">
        <label htmlFor="egs-duration">Duration</label>
        <input
          id="egs-duration"
          className="jp-mod-styled"
          type="text"
          value={current.duration}
          placeholder="2h"
          aria-describedby="egs-duration-hint"
          onChange={set('duration')}
          {...invalid('Duration')}
        />
        <span id="egs-duration-hint" className="egs-Muted">
          like 2h or 1h30m{slice?.policy.max_duration ? `; at most ${formatSpan(slice.policy.max_duration)}` : ''}
        </span>
      </div>
      <div className="egs-Field">
        <label htmlFor="egs-shape">Shape</label>
        <select id="egs-shape" className="jp-mod-styled" value={current.shape} onChange={set('shape')}>
          <option value="">any</option>
          {current.shape && !shapeNames.includes(current.shape) && <option value={current.shape}>{current.shape}</option>}
          {shapeNames.map(name => (
            <option key={name} value={name}>
              {name}
            </option>
          ))}
        </select>
      </div>
      <div className="egs-Field">
        <label htmlFor="egs-priority">Priority</label>
        <select id="egs-priority" className="jp-mod-styled" value={priority} onChange={set('priority')} {...invalid('Priority')}>
          {choices.map(c => (
            <option key={c.value} value={String(c.value)}>
              {c.label}
            </option>
          ))}
        </select>
      </div>
      <div className="egs-Field">
        <label htmlFor="egs-start">Start after</label>
        <input
          id="egs-start"
          className="jp-mod-styled"
          type="datetime-local"
          value={current.startAfter}
          aria-describedby="egs-start-hint"
          onChange={set('startAfter')}
          {...invalid('Start after')}
        />
        <span id="egs-start-hint" className="egs-Muted">
          optional, your time zone; empty: as soon as possible
        </span>
      </div>
      {formError && (
        <p id="egs-form-error" className="egs-Error" role="alert">
          {formError.message}
        </p>
      )}
      <div className="egs-Buttons">
        <button type="button" className="jp-mod-styled egs-Button" disabled={busy || !state.slices.length} onClick={getWaitTimes}>
          Get wait times
        </button>
        <button type="submit" className="jp-mod-styled jp-mod-accept egs-Button" disabled={busy || !state.slices.length}>
          Request GPUs
        </button>
      </div>
      {waits && waits.options.length > 0 && (
        <table className="egs-Table" aria-label="Wait times">
          <thead>
            <tr>
              <th scope="col">Pick</th>
              <th scope="col">Cluster</th>
              <th scope="col">Shape</th>
              <th scope="col">Starts</th>
              <th scope="col">Wait</th>
              <th scope="col">Cost/hr</th>
              <th scope="col">Total</th>
            </tr>
          </thead>
          <tbody>
            {waits.options.map(option => (
              <tr key={optionKey(option)} className={picked === option ? 'egs-Picked' : ''}>
                <td>
                  <input
                    type="radio"
                    name="egs-wait-pick"
                    value={optionKey(option)}
                    aria-label={`${option.cluster} ${option.shape.name}`}
                    checked={picked === option}
                    onChange={() => setForm(pickOption(current, option))}
                  />
                </td>
                <td>{option.cluster}</td>
                <td>{option.shape.name}</td>
                <td>{option.estimated_start ? formatClock(option.estimated_start, now) : '–'}</td>
                <td>{option.wait_seconds ? formatSpan(option.wait_seconds) : 'now'}</td>
                <td>{formatMoney(option.cost_per_hour)}</td>
                <td>{formatMoney(option.estimated_cost)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {waits && waits.needs_approval.length > 0 && (
        <p className="egs-Muted">An admin must approve this: {waits.needs_approval.join('; ')}.</p>
      )}
    </form>
  );
}
