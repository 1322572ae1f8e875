{{/* The objects' name: the release's, or wasmstream when the release is named so. */}}
{{- define "wasmstream.fullname" -}}
{{- if eq .Release.Name .Chart.Name -}}
{{- .Chart.Name -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 52 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "wasmstream.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "wasmstream.labels" -}}
{{ include "wasmstream.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/*
GOMEMLIMIT: goMemLimitPercent of resources.limits.memory, in MiB. The
limit must be a whole number of Mi or Gi for the template to compute it.
*/}}
{{- define "wasmstream.goMemLimit" -}}
{{- $m := toString .Values.resources.limits.memory -}}
{{- $mi := 0 -}}
{{- if regexMatch "^[0-9]+Gi$" $m -}}
{{- $mi = mul (atoi (trimSuffix "Gi" $m)) 1024 -}}
{{- else if regexMatch "^[0-9]+Mi$" $m -}}
{{- $mi = atoi (trimSuffix "Mi" $m) -}}
{{- else -}}
{{- fail (printf "resources.limits.memory: %q: want a whole number of Mi or Gi (2Gi, 1536Mi), from which GOMEMLIMIT is set below it" $m) -}}
{{- end -}}
{{- $p := int .Values.goMemLimitPercent -}}
{{- if or (lt $p 10) (gt $p 95) -}}
{{- fail (printf "goMemLimitPercent: %d: want 10-95 (the rest of resources.limits.memory is room outside the Go heap)" $p) -}}
{{- end -}}
{{- printf "%dMiB" (div (mul $mi $p) 100) -}}
{{- end -}}

{{/* Where the chart mounts the Kafka files. */}}
{{- define "wasmstream.kafkaDir" -}}/etc/wasmstream-kafka{{- end -}}

{{/*
The host's config.yaml: .Values.config with the keys the chart owns set
(the listeners, the state volume's paths, Kafka's files and SASL).
*/}}
{{- define "wasmstream.config" -}}
{{- $cfg := deepCopy (.Values.config | default dict) -}}
{{- $metrics := deepCopy (get $cfg "metrics" | default dict) -}}
{{- $_ := set $metrics "listen" (printf "0.0.0.0:%d" (int .Values.metrics.port)) -}}
{{- $_ = set $cfg "metrics" $metrics -}}
{{- $admin := deepCopy (get $cfg "admin" | default dict) -}}
{{- $_ = set $admin "listen" (printf "127.0.0.1:%d" (int .Values.admin.port)) -}}
{{- $_ = set $admin "store_dir" "/var/lib/wasmstream/store" -}}
{{- $_ = set $cfg "admin" $admin -}}
{{- $host := deepCopy (get $cfg "host" | default dict) -}}
{{- $_ = set $host "compile_cache_dir" "/var/lib/wasmstream/compiled" -}}
{{- $_ = set $cfg "host" $host -}}
{{- $kafka := deepCopy (get $cfg "kafka" | default dict) -}}
{{- $dir := include "wasmstream.kafkaDir" . -}}
{{- with .Values.kafka.tls -}}
{{- if .enabled -}}
{{- $tls := dict "enabled" true -}}
{{- if or .ca.configMap .ca.secret -}}
{{- $_ = set $tls "ca_file" (printf "%s/ca/%s" $dir .ca.key) -}}
{{- end -}}
{{- if .clientSecret -}}
{{- $_ = set $tls "cert_file" (printf "%s/client/tls.crt" $dir) -}}
{{- $_ = set $tls "key_file" (printf "%s/client/tls.key" $dir) -}}
{{- end -}}
{{- if .serverName -}}
{{- $_ = set $tls "server_name" .serverName -}}
{{- end -}}
{{- $_ = set $kafka "tls" $tls -}}
{{- else if or .ca.configMap .ca.secret .clientSecret -}}
{{- fail "kafka.tls.ca or kafka.tls.clientSecret is set but kafka.tls.enabled is false" -}}
{{- end -}}
{{- end -}}
{{- with .Values.kafka.sasl -}}
{{- if .mechanism -}}
{{- $sasl := dict "mechanism" .mechanism -}}
{{- if .username -}}
{{- $_ = set $sasl "username" .username -}}
{{- end -}}
{{- if eq .mechanism "OAUTHBEARER" -}}
{{- if not .oauthTokenSecret.name -}}
{{- fail "kafka.sasl.mechanism OAUTHBEARER: set kafka.sasl.oauthTokenSecret.name (an existing Secret holding the token)" -}}
{{- end -}}
{{- $_ = set $sasl "token_file" (printf "%s/oauth/%s" $dir .oauthTokenSecret.key) -}}
{{- end -}}
{{- $_ = set $kafka "sasl" $sasl -}}
{{- end -}}
{{- end -}}
{{- $_ = set $cfg "kafka" $kafka -}}
{{- toYaml $cfg -}}
{{- end -}}
