{{/* Labels on every object of the chart. */}}
{{- define "egs-hub.labels" -}}
app.kubernetes.io/name: egs-hub
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* The egs pod's labels, which its Service, PodDisruptionBudget and NetworkPolicy select. */}}
{{- define "egs-hub.egs.selectorLabels" -}}
app.kubernetes.io/name: egs-hub
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: egs
{{- end -}}

{{/* The name of cluster-scoped objects: one release per cluster, named after it. */}}
{{- define "egs-hub.clusterName" -}}
{{- printf "%s-%s" .Release.Name "egs-hub" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Namespaced names follow Zero to JupyterHub's (hub, proxy-public, ...): its prefix, then ours. */}}
{{- define "egs-hub.egs.fullname" -}}
{{- include "jupyterhub.fullname.dash" . }}egs
{{- end -}}

{{- define "egs-hub.hubConfig.fullname" -}}
{{- include "jupyterhub.fullname.dash" . }}egs-hub-config
{{- end -}}

{{/* Where the hub finds hub_config/ (jupyterhub.hub.extraVolumeMounts, extraConfig). */}}
{{- define "egs-hub.hubConfig.mountPath" -}}
/usr/local/etc/jupyterhub/egs
{{- end -}}

{{- define "egs-hub.egs.cookieSecretName" -}}
{{- include "jupyterhub.fullname.dash" . }}egs-cookie
{{- end -}}

{{/* The Secret with the webhook's serving certificate: webhook.existingSecret, or the chart's own. */}}
{{- define "egs-hub.webhookTLS.fullname" -}}
{{- .Values.webhook.existingSecret | default (printf "%segs-webhook-tls" (include "jupyterhub.fullname.dash" .)) }}
{{- end -}}

{{- define "egs-hub.egs.serviceAccountName" -}}
{{- .Values.egs.serviceAccount.name | default (include "egs-hub.egs.fullname" .) }}
{{- end -}}

{{/* The hub's ServiceAccount as Zero to JupyterHub names it (jupyterhub.hub-serviceaccount.fullname,
which reads .Values.hub and so cannot be called from here). */}}
{{- define "egs-hub.hub.serviceAccountName" -}}
{{- $sa := .Values.jupyterhub.hub.serviceAccount }}
{{- if $sa.create }}
{{- $sa.name | default (include "jupyterhub.hub.fullname" .) }}
{{- else }}
{{- $sa.name | default "default" }}
{{- end }}
{{- end -}}

{{/* The Secret holding the hub services' API tokens: Zero to JupyterHub's, or hub.existingSecret
(as jupyterhub.hub-existing-secret-or-default.fullname, which reads .Values.hub too). */}}
{{- define "egs-hub.hub.secretName" -}}
{{- .Values.jupyterhub.hub.existingSecret | default (include "jupyterhub.hub.fullname" .) }}
{{- end -}}

{{/* Where the hub must find the egs service: its Service's name and HTTP port. */}}
{{- define "egs-hub.egs.url" -}}
{{- printf "http://%s:%v" (include "egs-hub.egs.fullname" .) .Values.egs.port }}
{{- end -}}

{{- define "egs-hub.egs.image" -}}
{{- printf "%s:%s" .Values.egs.image.name (.Values.egs.image.tag | default .Chart.AppVersion) }}
{{- end -}}

{{- define "egs-hub.database.sqlite" -}}
{{- if not (or .Values.egs.database.url .Values.egs.database.existingSecret) }}true{{ end }}
{{- end -}}

{{/* The egs service's data directory: the SQLite PVC, or an emptyDir (its cookie secret) with PostgreSQL. */}}
{{- define "egs-hub.egs.dataDir" -}}
/var/lib/egs
{{- end -}}

{{- define "egs-hub.egs.prefix" -}}
{{- printf "%sservices/egs/" (.Values.jupyterhub.hub.baseUrl | default "/") }}
{{- end -}}

{{/*
  Settings of Zero to JupyterHub that egs-hub relies on; a value that breaks one fails the
  render, naming it, instead of a hub that cannot reach the service.
*/}}
{{- define "egs-hub.checks" -}}
{{- $services := .Values.jupyterhub.hub.services | default dict }}
{{- if not (hasKey $services "egs") }}
{{- fail "jupyterhub.hub.services.egs is missing: the hub must know the egs service (url: http://egs:8080)" }}
{{- end }}
{{- $want := include "egs-hub.egs.url" . }}
{{- if ne (trimSuffix "/" ($services.egs.url | default "")) $want }}
{{- fail (printf "jupyterhub.hub.services.egs.url must be %s (the egs Service and egs.port), not %q" $want ($services.egs.url | default "")) }}
{{- end }}
{{- range $who, $policy := dict "jupyterhub.hub.networkPolicy" .Values.jupyterhub.hub.networkPolicy "jupyterhub.proxy.chp.networkPolicy" .Values.jupyterhub.proxy.chp.networkPolicy "jupyterhub.singleuser.networkPolicy" .Values.jupyterhub.singleuser.networkPolicy }}
{{- $open := false }}
{{- range $policy.egress }}
{{- range .ports }}{{ if eq (toString .port) (toString $.Values.egs.port) }}{{ $open = true }}{{ end }}{{ end }}
{{- end }}
{{- if not $open }}
{{- fail (printf "%s.egress must let it reach the egs pods on egs.port (%v), as values.yaml does" $who $.Values.egs.port) }}
{{- end }}
{{- end }}
{{- $storage := dig "storage" "type" "none" (.Values.jupyterhub.singleuser | default dict) }}
{{- if ne $storage "none" }}
{{- fail (printf "jupyterhub.singleuser.storage.type must be none, not %q: SliceKubeSpawner starts servers in their workspace's namespaces and makes each member's home volume there from the slice policy (home_volume_size, home_volume_class)" $storage) }}
{{- end }}
{{- if and .Values.egs.database.url .Values.egs.database.existingSecret }}
{{- fail "egs.database.url and egs.database.existingSecret are both set: give the PostgreSQL URL one way" }}
{{- end }}
{{- if and (gt (int .Values.egs.replicas) 1) (include "egs-hub.database.sqlite" .) }}
{{- fail (printf "egs.replicas is %v: more than one replica needs PostgreSQL (egs.database.url or egs.database.existingSecret); SQLite's file is one pod's" .Values.egs.replicas) }}
{{- end }}
{{- with .Values.egs.database.url }}
{{- if not (regexMatch "^postgres(ql)?(\\+psycopg)?://" .) }}
{{- fail (printf "egs.database.url must be a PostgreSQL URL (postgresql://user:password@host/db), not %q; leave it empty for SQLite" .) }}
{{- end }}
{{- end }}
{{- $mounted := false }}
{{- range .Values.jupyterhub.hub.extraVolumeMounts }}
{{- if and (eq .name "egs-hub-config") (eq .mountPath (include "egs-hub.hubConfig.mountPath" $)) }}
{{- $mounted = true }}
{{- end }}
{{- end }}
{{- $volume := false }}
{{- range .Values.jupyterhub.hub.extraVolumes }}
{{- if and (eq .name "egs-hub-config") (eq (dig "configMap" "name" "" .) (include "egs-hub.hubConfig.fullname" $)) }}
{{- $volume = true }}
{{- end }}
{{- end }}
{{- if not (and $mounted $volume) }}
{{- fail (printf "jupyterhub.hub.extraVolumes and extraVolumeMounts must mount the ConfigMap %s as the volume egs-hub-config at %s (hub_config/), as values.yaml does" (include "egs-hub.hubConfig.fullname" .) (include "egs-hub.hubConfig.mountPath" .)) }}
{{- end }}
{{- if not (contains (include "egs-hub.hubConfig.mountPath" .) (dig "egs-hub" "" (.Values.jupyterhub.hub.extraConfig | default dict))) }}
{{- fail (printf "jupyterhub.hub.extraConfig.egs-hub must run the Python files in %s (hub_config/), as values.yaml does" (include "egs-hub.hubConfig.mountPath" .)) }}
{{- end }}
{{- end -}}

{{/* EGS_DB_URL: the PostgreSQL URL from egs.database.url or its Secret, else SQLite on the PVC. */}}
{{- define "egs-hub.egs.databaseEnv" -}}
- name: EGS_DB_URL
{{- if .Values.egs.database.existingSecret }}
  valueFrom:
    secretKeyRef:
      name: {{ .Values.egs.database.existingSecret }}
      key: {{ .Values.egs.database.existingSecretKey }}
{{- else if .Values.egs.database.url }}
  value: {{ .Values.egs.database.url | quote }}
{{- else }}
  value: {{ printf "sqlite:///%s/egs.sqlite" (include "egs-hub.egs.dataDir" .) | quote }}
{{- end }}
{{- end -}}

{{/* The ServiceMonitor is rendered when asked for and the Prometheus Operator's CRD is there. */}}
{{- define "egs-hub.serviceMonitor.enabled" -}}
{{- if and .Values.egs.metrics.serviceMonitor.enabled (.Capabilities.APIVersions.Has "monitoring.coreos.com/v1/ServiceMonitor") }}true{{ end }}
{{- end -}}

{{/* The namespaces of the Kubernetes backend's check Jobs and node-pool requests (KubernetesBackend's
checks_namespace and pools_namespace); the chart makes them and the Roles the service has there. */}}
{{- define "egs-hub.checksNamespace" -}}egs-checks{{- end -}}
{{- define "egs-hub.poolsNamespace" -}}egs-pools{{- end -}}

{{/* The ClusterRoles the service binds in each slice namespace (EGSService.namespace_grants), the
service's own first: what it and the hub may do there, and nowhere else. */}}
{{- define "egs-hub.namespaceGrants" -}}
{{- $egs := dict "cluster_role" (printf "%s-workspace" (include "egs-hub.clusterName" .)) "service_account" (include "egs-hub.egs.serviceAccountName" .) "namespace" .Release.Namespace }}
{{- $hub := dict "cluster_role" (printf "%s-spawner" (include "egs-hub.clusterName" .)) "service_account" (include "egs-hub.hub.serviceAccountName" .) "namespace" .Release.Namespace }}
{{- list $egs $hub | toJson }}
{{- end -}}
