import {
  applyTemplate,
  durationText,
  EMPTY_FORM,
  FormError,
  IRequestForm,
  parseDuration,
  pickedOption,
  pickOption,
  priorityChoices,
  requestBody,
  unitChoices,
  usableTemplates,
  migProfile,
  waitTimesBody
} from '../request';
import { ITemplate, IWaitTimeOption } from '../tokens';
import { NOW, slice } from './builders';

const form = (change: Partial<IRequestForm> = {}): IRequestForm => ({ ...EMPTY_FORM, slice: 'ml', ...change });

function option(cluster: string, name: string): IWaitTimeOption {
  return {
    cluster,
    shape: { name, model: name.split('-')[0], memory_gb: 80, gpus_per_node: 8, mig_profile: null, gpu_equivalents: 1, replicas: 1 },
    estimated_start: new Date(NOW).toISOString(),
    wait_seconds: 0,
    nodes: [],
    gpus: 2,
    cost_per_hour: null,
    estimated_cost: null
  };
}

function template(change: Partial<ITemplate> = {}): ITemplate {
  return {
    name: 'big',
    description: '',
    scope: 'global',
    project: null,
    slice: null,
    cluster: null,
    shape: null,
    gpus: 8,
    nodes: null,
    duration: 5400,
    priority: null,
    idle_timeout: null,
    preemptible: null,
    created_at: new Date(NOW).toISOString(),
    created_by: 'admin',
    updated_at: new Date(NOW).toISOString(),
    ...change
  };
}

describe('templates', () => {
  it('lists the global ones, the slice project\'s and its own', () => {
    const all = [
      template({ name: 'everyone' }),
      template({ name: 'ours', slice: 'ml' }),
      template({ name: 'theirs', slice: 'cv' }),
      template({ name: 'project', project: 'default' }),
      template({ name: 'other-project', project: 'research' })
    ];
    expect(usableTemplates(all, slice()).map(t => t.name)).toEqual(['everyone', 'ours', 'project']);
    expect(usableTemplates(all, undefined)).toEqual([]);
  });

  it('fills the form and names the template in the body', () => {
    const filled = applyTemplate(form(), template({ nodes: 2, gpus: null, shape: 'H100', priority: 150 }));
    expect(filled).toEqual({
      ...form(),
      template: 'big',
      unit: 'nodes',
      count: '2',
      duration: '1h30m',
      shape: 'H100',
      priority: '150'
    });
    expect(requestBody(filled, slice(), NOW)).toEqual({
      slice: 'ml',
      template: 'big',
      duration: '1h30m',
      nodes: 2,
      priority: 150,
      shape: 'H100'
    });
    expect(applyTemplate(filled, undefined).template).toBe('');
  });

  it('writes durations exactly as the service reads them', () => {
    expect([durationText(5400), durationText(90), durationText(86400 + 61), durationText(0)]).toEqual([
      '1h30m',
      '1m30s',
      '1d1m1s',
      '0s'
    ]);
  });
});

function formError(run: () => unknown): FormError {
  try {
    run();
  } catch (error) {
    if (error instanceof FormError) {
      return error;
    }
    throw error;
  }
  throw new Error('no FormError');
}

describe('parseDuration', () => {
  const cases: [string, number | null][] = [
    ['2h', 7200],
    ['1h30m', 5400],
    [' 90m ', 5400],
    ['1d2h', 93600],
    ['1w', 604800],
    ['3600', 3600],
    ['0', null],
    ['0h', null],
    ['30m2h', null],
    ['2 hours', null],
    ['', null]
  ];
  it.each(cases)('%p -> %p', (text, want) => {
    expect(parseDuration(text)).toBe(want);
  });
});

describe('requestBody', () => {
  it('sends what the form says', () => {
    expect(
      requestBody(form({ count: '2', duration: '2h', priority: '250', shape: 'H100-80GB x8', cluster: 'local' }), slice(), NOW)
    ).toEqual({ slice: 'ml', gpus: 2, duration: '2h', priority: 250, shape: 'H100-80GB x8', cluster: 'local' });
  });

  it('asks for whole nodes', () => {
    expect(requestBody(form({ unit: 'nodes', count: '1' }), slice(), NOW)).toEqual({ slice: 'ml', nodes: 1, duration: '1h' });
  });

  it('asks for a share of a time-sliced GPU, of any shape or the picked one', () => {
    expect(requestBody(form({ unit: 'share', count: '0.25' }), slice(), NOW)).toEqual({ slice: 'ml', gpu_share: 0.25, duration: '1h' });
    expect(requestBody(form({ unit: 'share', count: '.5', shape: 'H100-80GB shared/2 x2' }), slice(), NOW)).toEqual({
      slice: 'ml',
      gpu_share: 0.5,
      duration: '1h',
      shape: 'H100-80GB shared/2 x2'
    });
  });

  it('offers a share only in a slice whose policy allows sharing', () => {
    const sharing = slice({ policy: { ...slice().policy, gpu_sharing: true } });
    expect([unitChoices(slice()), unitChoices(sharing), unitChoices(undefined)]).toEqual([
      ['gpus', 'nodes'],
      ['gpus', 'nodes', 'share'],
      ['gpus', 'nodes']
    ]);
  });

  it('sends the start time in UTC from the browser’s local time', () => {
    expect(requestBody(form({ startAfter: '2024-05-14T16:30' }), slice(), NOW).start_after).toBe('2024-05-14T14:30:00.000Z');
  });

  const errors: [string, Partial<IRequestForm>, string, string][] = [
    ['no workspace', { slice: '' }, 'Workspace', 'Pick a workspace (slice) for the request'],
    ['a count that is not whole', { count: '1.5' }, 'GPUs', 'GPUs must be a whole number from 1 to 100000, not "1.5"'],
    ['no nodes', { unit: 'nodes', count: '0' }, 'Nodes', 'Nodes must be a whole number from 1 to 100000, not "0"'],
    ['a duration in words', { duration: 'two hours' }, 'Duration', 'Duration must be like "2h", "1h30m" or "90m", not "two hours"'],
    ['longer than the policy', { duration: '2d' }, 'Duration', 'Duration 2d is longer than ml allows (1d)'],
    ['a start in the past', { startAfter: '2024-05-14T10:00' }, 'Start after', 'Start after is in the past; leave it empty to start as soon as possible'],
    ['priority above the policy', { priority: '301' }, 'Priority', 'Priority must be from 1 to 300 in ml, not "301"'],
    ['a whole GPU as a share', { unit: 'share', count: '1' }, 'Share of a GPU', 'Share of a GPU must be a number above 0 and below 1, like 0.25, not "1"'],
    ['no share', { unit: 'share', count: '0' }, 'Share of a GPU', 'Share of a GPU must be a number above 0 and below 1, like 0.25, not "0"'],
    ['a share in words', { unit: 'share', count: 'half' }, 'Share of a GPU', 'Share of a GPU must be a number above 0 and below 1, like 0.25, not "half"'],
    [
      'a share of MIG instances',
      { unit: 'share', count: '0.5', shape: 'H100-80GB 1g.10gb x14' },
      'Shape',
      'A share is of a whole time-sliced GPU; H100-80GB 1g.10gb x14 names MIG instances'
    ]
  ];
  it.each(errors)('refuses %s, naming the field', (_, change, field, message) => {
    const error = formError(() => requestBody(form(change), slice(), NOW));
    expect([error.field, error.message]).toEqual([field, message]);
  });
});

describe('wait times', () => {
  it('asks for every shape on every cluster, whatever is picked', () => {
    expect(waitTimesBody(form({ shape: 'H100', cluster: 'local' }), slice(), NOW)).toEqual({
      slice: 'ml',
      gpus: 1,
      duration: '1h'
    });
  });

  it('keeps a MIG shape as its GPU type and profile, so that the answer lists those instances', () => {
    expect(waitTimesBody(form({ shape: 'H100-80GB 1g.10gb x14', cluster: 'local' }), slice(), NOW)).toEqual({
      slice: 'ml',
      gpus: 1,
      duration: '1h',
      shape: 'H100-80GB 1g.10gb'
    });
    expect([migProfile('H100 3G.40GB'), migProfile('H100-80GB x8'), migProfile('1g.10gb'), migProfile('')]).toEqual([
      '3g.40gb',
      null,
      null,
      null
    ]);
  });

  it('asks for a share on any time-sliced GPU that can serve it', () => {
    expect(waitTimesBody(form({ unit: 'share', count: '0.25', shape: 'H100-80GB shared/4 x4', cluster: 'local' }), slice(), NOW)).toEqual({
      slice: 'ml',
      gpu_share: 0.25,
      duration: '1h'
    });
  });

  it('picks a row into the form and finds it again', () => {
    const options = [option('local', 'A100-80GB x8'), option('k8s', 'H100-80GB x8'), option('local', 'H100-80GB x8')];
    const picked = pickOption(form(), options[2]);
    expect([picked.shape, picked.cluster]).toEqual(['H100-80GB x8', 'local']);
    expect(pickedOption(picked, options)).toBe(options[2]);
    expect(pickedOption(form({ shape: 'H100-80GB x8' }), options)).toBe(options[1]);
    expect(pickedOption(form(), options)).toBeUndefined();
  });
});

describe('priorityChoices', () => {
  it('offers each band the policy allows at its lowest priority', () => {
    expect(priorityChoices(slice())).toEqual([
      { label: 'low (1)', value: 1 },
      { label: 'medium (101)', value: 101 },
      { label: 'high (201)', value: 201 }
    ]);
    const capped = slice({ policy: { ...slice().policy, max_priority: 120 } });
    expect(priorityChoices(capped)).toEqual([
      { label: 'low (1)', value: 1 },
      { label: 'medium (101)', value: 101 }
    ]);
    const low = slice({ policy: { ...slice().policy, max_priority: 100 } });
    expect(priorityChoices(low)).toEqual([{ label: 'low (1)', value: 1 }]);
  });
});
