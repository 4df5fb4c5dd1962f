{{/* The objects' name: the release name, or the chart's when they are the same. */}}
{{- define "rse.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/*
Selector labels. app.kubernetes.io/name is also the job label of the ServiceMonitor and the
PodMonitor: job="redis-streams-exporter" whatever the release is called.
*/}}
{{- define "rse.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "rse.labels" -}}
{{ include "rse.selectorLabels" . }}
app.kubernetes.io/component: exporter
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The exporter's configuration. */}}
{{- define "rse.config" -}}
{{- if .Values.config -}}
{{- .Values.config -}}
{{- else if .Values.multiTarget.enabled -}}
{{- .Files.Get "files/multi-target.toml" -}}
{{- else -}}
{{- .Files.Get "files/config.toml" -}}
{{- end -}}
{{- end -}}
