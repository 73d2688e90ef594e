// Read-only aggregations over API answers: pure functions, no DOM, no calls.
"use strict";

// What one GPU of each shape counts as, by `${cluster}\u0000${shape name}` of GET /inventory: 1 for a
// whole GPU, its part of a GPU for a MIG instance or a share of a time-sliced GPU (GPU-equivalents).
function shapeEquivalents(inventory) {
  return new Map(inventory.shapes.map((s) => [`${s.cluster}\u0000${s.name}`, s.gpu_equivalents]));
}

// What one GPU of each node counts as, by `${cluster}\u0000${node}` of GET /inventory (GPU-equivalents).
export function nodeEquivalents(inventory) {
  const byShape = shapeEquivalents(inventory);
  const nodes = new Map();
  for (const cluster of inventory.clusters) {
    for (const node of cluster.nodes) {
      nodes.set(`${cluster.name}\u0000${node.name}`, byShape.get(`${cluster.name}\u0000${node.shape}`) ?? 1);
    }
  }
  return nodes;
}

// GPU-seconds of the schedule's past and current windows inside [from, to], per key of a window
// (`keyOf(window)`, e.g. its slice or the user who asked for its GPR), in GPU-equivalents
// (`equivalents`: nodeEquivalents; a node not in it counts whole GPUs).
export function gpuSecondsBy(schedule, from, to, keyOf, equivalents = new Map()) {
  const totals = new Map();
  for (const node of schedule.nodes) {
    const each = equivalents.get(`${node.cluster}\u0000${node.node}`) ?? 1;
    for (const w of node.windows) {
      if (w.state === "planned") continue;
      const start = Math.max(new Date(w.start).getTime(), from);
      const end = Math.min(w.end ? new Date(w.end).getTime() : to, to);
      if (end <= start) continue;
      const key = keyOf(w);
      totals.set(key, (totals.get(key) || 0) + ((end - start) / 1000) * w.gpu_count * each);
    }
  }
  return totals;
}

// Per (cluster, shape): total, bound (held by a GPR now), free and not usable GPUs, from GET /inventory,
// and what one of them counts as (GPU-equivalents).
export function capacity(inventory) {
  const byShape = shapeEquivalents(inventory);
  const rows = new Map();
  for (const cluster of inventory.clusters) {
    for (const node of cluster.nodes) {
      const key = `${cluster.name}\u0000${node.shape}`;
      if (!rows.has(key)) {
        rows.set(key, { cluster: cluster.name, shape: node.shape, equivalents: byShape.get(key) ?? 1, total: 0, bound: 0,
          free: 0 });
      }
      const row = rows.get(key);
      for (const gpu of node.gpus) {
        row.total += 1;
        if (gpu.bound) row.bound += 1;
        else if (gpu.healthy && node.schedulable) row.free += 1;
      }
    }
  }
  return [...rows.values()].map((r) => ({ ...r, unusable: r.total - r.bound - r.free }))
    .sort((a, b) => a.cluster.localeCompare(b.cluster) || a.shape.localeCompare(b.shape));
}

export function top(map, n) {
  return [...map.entries()].sort((a, b) => b[1] - a[1] || String(a[0]).localeCompare(String(b[0]))).slice(0, n);
}

export const percent = (part, whole) => (whole ? `${Math.round((100 * part) / whole)}%` : "—");
