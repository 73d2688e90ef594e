// Download kubeconfig: per workspace and Kubernetes cluster it has namespaces on, GET
// /slices/{name}/kubeconfig and save its YAML as <slice>-<cluster>.kubeconfig.
"use strict";

import { act, api, el, localTime, query } from "./api.js";

// How long the kubeconfig's token is valid (the API takes 10 minutes to 7 days; empty: its default).
const VALID_FOR = [["", "service default"], ["3600", "1 hour"], ["86400", "1 day"], ["604800", "7 days"]];
const saved = new Map(); // "slice/cluster" -> the last download's answer (what the controls show)

export const fetchKubeconfig = (slice, cluster, expiration) =>
  api("GET", `slices/${encodeURIComponent(slice)}/kubeconfig${query({ cluster, expiration })}`);

// A Blob and a temporary link with `download`: the browser saves the text as a file (no inline script).
function saveFile(name, text) {
  const url = URL.createObjectURL(new Blob([text], { type: "application/yaml" }));
  const link = el("a", { href: url, download: name, hidden: true });
  document.body.append(link);
  link.click();
  link.remove();
  // The download has started from the URL by now; the object URL is freed a little later all the same.
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

async function download(slice, cluster, expiration) {
  let answer;
  try {
    answer = await fetchKubeconfig(slice, cluster, expiration);
  } catch (e) {
    throw new Error(`Could not download the kubeconfig of ${slice} on ${cluster}: ${e.message}`);
  }
  const name = `${answer.slice}-${answer.cluster}.kubeconfig`;
  saveFile(name, answer.kubeconfig);
  saved.set(`${slice}/${cluster}`, answer);
  return `Saved ${name} (namespace ${answer.namespace}); its token expires ${localTime(answer.expires_at)}.`;
}

// The clusters of `namespaces` ({cluster: [names]}) that are Kubernetes clusters the service knows.
function kubeconfigClusters(namespaces, clusters) {
  const known = new Set(clusters.map((c) => c.name));
  return Object.keys(namespaces).filter((c) => known.has(c)).sort();
}

// The "Download kubeconfig" controls of one workspace: one line per Kubernetes cluster it has namespaces on.
export function kubeconfigControls(slice, namespaces, clusters) {
  const names = kubeconfigClusters(namespaces, clusters);
  if (!names.length) return null;
  return el("ul", { class: "kubeconfigs", "aria-label": `Kubeconfigs of ${slice}` }, names.map((cluster) => {
    const last = saved.get(`${slice}/${cluster}`);
    // The select the button reads is the one in the page (a refresh keeps it, with its choice).
    const choose = (e) => {
      const expiration = e.currentTarget.parentElement.querySelector("select").value;
      act("", () => download(slice, cluster, expiration));
    };
    return el("li", { "data-kubeconfig": `${slice}/${cluster}` },
      el("button", { type: "button", "aria-label": `Download kubeconfig of ${slice} for ${cluster}`, onclick: choose },
        `Download kubeconfig (${cluster})`),
      " valid for ",
      el("select", { name: "expiration", "aria-label": `Kubeconfig of ${slice} on ${cluster} valid for` },
        VALID_FOR.map(([value, text]) => el("option", { value }, text))),
      last ? el("span", { class: "muted" }, ` last one: namespace ${last.namespace}, expires ${localTime(last.expires_at)}`)
        : null);
  }));
}
