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

{{/* The configuration without its comments: whole-line ones, and trailing ones with no quote after
the #, so a # inside a string stays. */}}
{{- define "rse.configCode" -}}
{{- $lines := list -}}
{{- range splitList "\n" (include "rse.config" .) -}}
{{- $line := regexReplaceAll "^\\s*#.*$" . "" -}}
{{- $lines = append $lines (regexReplaceAll "\\s#[^\"']*$" $line "") -}}
{{- end -}}
{{- join "\n" $lines -}}
{{- end -}}

{{/*
The TCP ports the exporter dials Redis on, as a JSON list of numbers, sorted: those of every
redis:// and rediss:// URL the chart can see (the configuration, extraArgs, and in /probe mode
multiTarget.targets; 6379 when a URL names none, none for a port that is a glob), of the
configuration's cluster_nodes and sentinels, and networkPolicy.extraRedisPorts.
*/}}
{{- define "rse.redisPorts" -}}
{{- $code := include "rse.configCode" . -}}
{{- $urls := regexFindAll "rediss?://[^\"'\\s,]+" (printf "%s\n%s" $code (join "\n" .Values.extraArgs)) -1 -}}
{{- if .Values.multiTarget.enabled -}}
{{- $urls = concat $urls .Values.multiTarget.targets -}}
{{- end -}}
{{- $ports := list -}}
{{- range $urls -}}
{{- /* scheme, user info, host (an IPv6 one in brackets), then the port, if any */ -}}
{{- $port := regexReplaceAll "^rediss?://(?:[^@/]*@)?(?:\\[[^\\]]*\\]|[^:/\\[]*)(?::([^/]*))?(?:/.*)?$" . "${1}" | default "6379" -}}
{{- if regexMatch "^[0-9]+$" $port -}}
{{- $ports = append $ports (atoi $port) -}}
{{- end -}}
{{- end -}}
{{- range regexFindAll "(cluster_nodes|sentinels)\\s*=\\s*\\[[^\\]]*\\]" $code -1 -}}
{{- range regexFindAll ":[0-9]+[\"']" . -1 -}}
{{- $ports = append $ports (trimPrefix ":" . | trimSuffix "\"" | trimSuffix "'" | atoi) -}}
{{- end -}}
{{- end -}}
{{- range .Values.networkPolicy.extraRedisPorts -}}
{{- $ports = append $ports (int .) -}}
{{- end -}}
{{- /* zero-padded so that sorting the text sorts the numbers */ -}}
{{- $padded := list -}}
{{- range $ports -}}
{{- $padded = append $padded (printf "%05d" .) -}}
{{- end -}}
{{- $sorted := list -}}
{{- range $padded | uniq | sortAlpha -}}
{{- $sorted = append $sorted (atoi .) -}}
{{- end -}}
{{- toJson $sorted -}}
{{- end -}}

{{/*
Checks what the chart can check without reading the cluster: a Secret it cannot read needs its key
named, and a password nobody reads is a mistake.
*/}}
{{- define "rse.validate" -}}
{{- with .Values.redisPassword.existingSecret -}}
{{- if not $.Values.redisPassword.existingSecretKey -}}
{{- fail (printf "redisPassword.existingSecret names the Secret %q but redisPassword.existingSecretKey is empty: set it to the key of %q that holds the Redis password (the chart cannot read the Secret to find it)" . .) -}}
{{- end -}}
{{- $code := include "rse.configCode" $ -}}
{{- $named := regexMatch "password_env\\s*=\\s*[\"']REDIS_PASSWORD[\"']" $code -}}
{{- /* Without targets of its own (and /probe off), the exporter's default target reads REDIS_PASSWORD. */ -}}
{{- $default := not (regexMatch "(?m)^\\s*(\\[\\[\\s*targets\\s*\\]\\]|targets\\s*=|allowed_targets\\s*=)" $code) -}}
{{- if not (or $named $default) -}}
{{- fail (printf "redisPassword.existingSecret %q is mapped to REDIS_PASSWORD, which the configuration never reads: add password_env = \"REDIS_PASSWORD\" to its target or auth module (the chart's default configuration has that line commented out: pass your own with --set-file config=...)" .) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
The labels of a prometheus-operator object: the chart's, the `release` label kube-prometheus-stack
selects by (prometheusRelease), then the object's own (they win).
*/}}
{{- define "rse.monitorLabels" -}}
{{ include "rse.labels" .root }}
{{- if and .root.Values.prometheusRelease (not (hasKey (.own | default dict) "release")) }}
release: {{ .root.Values.prometheusRelease | quote }}
{{- end }}
{{- with .own }}
{{ toYaml . }}
{{- end }}
{{- end }}
