{{/* Labels on every object of the chart. */}}
{{- define "egs-hub.labels" -}}
app.kubernetes.io/name: egs-hub
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* The name of cluster-scoped objects: one release per cluster, named after it. */}}
{{- define "egs-hub.clusterName" -}}
{{- printf "%s-%s" .Release.Name "egs-hub" | trunc 63 | trimSuffix "-" -}}
{{- end -}}
