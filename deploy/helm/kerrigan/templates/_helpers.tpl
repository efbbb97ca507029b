{{/* The chart's name, or nameOverride. */}}
{{- define "kerrigan.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The prefix of every object's name: the release's name, with the chart's unless it already holds it. */}}
{{- define "kerrigan.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Labels every object carries. */}}
{{- define "kerrigan.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "kerrigan.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* The labels that select this release's pods; a component label (server, worker, migration) narrows them. */}}
{{- define "kerrigan.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kerrigan.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "kerrigan.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* The Secret the pods read: the one named in values, or the chart's. */}}
{{- define "kerrigan.secretName" -}}
{{- default (include "kerrigan.fullname" .) .Values.secret.existingSecret -}}
{{- end -}}

{{- define "kerrigan.privateKeyDir" -}}/run/secrets/kerrigan{{- end -}}
{{- define "kerrigan.privateKeyFile" -}}github-private-key.pem{{- end -}}

{{/*
Settings that must come from the Secret, and those the chart sets itself: `config` may hold neither.
Kerrigan refuses KERRIGAN_GITHUB_PRIVATE_KEY beside KERRIGAN_GITHUB_PRIVATE_KEY_PATH, which the chart sets.
*/}}
{{- define "kerrigan.secretSettings" -}}
KERRIGAN_DATABASE_URL KERRIGAN_WEBHOOK_SECRET KERRIGAN_GITHUB_CLIENT_SECRET KERRIGAN_SESSION_SECRET KERRIGAN_METRICS_TOKEN KERRIGAN_SECRETS_KEY
{{- end -}}
{{/*
Settings the chart makes when `secret.settings` leaves them empty: the secrets key (without it no repository
secret can be set, and losing it loses them all), the metrics token (without it /metrics answers anyone),
and the session secret (without it each replica signs sign-ins with a key of its own, lost at a restart).
*/}}
{{- define "kerrigan.madeSettings" -}}
KERRIGAN_SECRETS_KEY KERRIGAN_METRICS_TOKEN KERRIGAN_SESSION_SECRET
{{- end -}}

{{/*
A made setting's value: the one given in values; else the one the release's Secret already holds, so an
upgrade keeps it (`lookup` reads the cluster; `helm template` has none and makes a new one each time); else a
new one. The secrets key is a Fernet key (32 random bytes, URL-safe base64); the others, random letters and
digits.
*/}}
{{- define "kerrigan.madeSetting" -}}
{{- $given := index .root.Values.secret.settings .name | default "" -}}
{{- if $given -}}
{{- include "kerrigan.settingValue" $given -}}
{{- else -}}
{{- $existing := lookup "v1" "Secret" .root.Release.Namespace (include "kerrigan.secretName" .root) -}}
{{- $kept := "" -}}
{{- if and $existing $existing.data -}}
{{- $kept = index $existing.data .name | default "" | b64dec -}}
{{- end -}}
{{- if $kept -}}
{{- $kept -}}
{{- else if eq .name "KERRIGAN_SECRETS_KEY" -}}
{{- randBytes 32 | replace "+" "-" | replace "/" "_" -}}
{{- else -}}
{{- randAlphaNum 48 -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "kerrigan.chartSettings" -}}
KERRIGAN_HOST KERRIGAN_PORT KERRIGAN_WORKERS KERRIGAN_GITHUB_PRIVATE_KEY KERRIGAN_GITHUB_PRIVATE_KEY_PATH
{{- end -}}

{{/* Bad values stop the render with one line naming the field. */}}
{{- define "kerrigan.validate" -}}
{{- $secret := splitList " " (include "kerrigan.secretSettings" .) -}}
{{- $chart := splitList " " (include "kerrigan.chartSettings" .) -}}
{{- range $name, $value := .Values.config -}}
{{- if has $name $secret -}}
{{- fail (printf "config.%s is secret: set secret.settings.%s (or put it in secret.existingSecret) instead" $name $name) -}}
{{- end -}}
{{- if has $name $chart -}}
{{- fail (printf "config.%s is set by the chart: leave it out" $name) -}}
{{- end -}}
{{- end -}}
{{- if not .Values.secret.existingSecret -}}
{{- range $name, $value := .Values.secret.settings -}}
{{- if has $name $chart -}}
{{- fail (printf "secret.settings.%s is set by the chart: leave it out (the private key goes in secret.githubPrivateKey)" $name) -}}
{{- end -}}
{{- end -}}
{{- $url := .Values.secret.settings.KERRIGAN_DATABASE_URL | default "" -}}
{{- if not $url -}}
{{- fail "secret.settings.KERRIGAN_DATABASE_URL is required (postgresql+asyncpg://USER:PASSWORD@HOST:5432/DB), or name a Secret that holds it in secret.existingSecret" -}}
{{- end -}}
{{- if not (hasPrefix "postgresql+asyncpg://" $url) -}}
{{- fail "secret.settings.KERRIGAN_DATABASE_URL must start with postgresql+asyncpg://: the server replicas and the workers share one PostgreSQL database" -}}
{{- end -}}
{{- if not .Values.secret.githubPrivateKey -}}
{{- fail "secret.githubPrivateKey is required: the GitHub App's private key (--set-file secret.githubPrivateKey=app.pem), or name a Secret that holds it in secret.existingSecret" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
A setting's value as the environment's text. YAML numbers reach templates as floats, which print 1234567 as
1.234567e+06: whole numbers print as integers.
*/}}
{{- define "kerrigan.settingValue" -}}
{{- if and (kindIs "float64" .) (eq . (float64 (int64 .))) -}}
{{- int64 . | toString -}}
{{- else -}}
{{- toString . -}}
{{- end -}}
{{- end -}}

{{/* The environment every Kerrigan container shares, as `env` items: `config`, and the private key's path. */}}
{{- define "kerrigan.envVars" -}}
{{- range $name, $value := .Values.config }}
{{- if $value }}
- name: {{ $name }}
  value: {{ include "kerrigan.settingValue" $value | quote }}
{{- end }}
{{- end }}
- name: KERRIGAN_GITHUB_PRIVATE_KEY_PATH
  value: {{ printf "%s/%s" (include "kerrigan.privateKeyDir" .) (include "kerrigan.privateKeyFile" .) | quote }}
{{- end -}}

{{/* The Secret's settings, as `envFrom` items. */}}
{{- define "kerrigan.envFrom" -}}
- secretRef:
    name: {{ include "kerrigan.secretName" . }}
{{- end -}}

{{/* The private key's volume, and /tmp: the root filesystem is read-only. */}}
{{- define "kerrigan.volumes" -}}
- name: github-private-key
  secret:
    secretName: {{ include "kerrigan.secretName" . }}
    items:
      - key: {{ .Values.secret.privateKeyKey }}
        path: {{ include "kerrigan.privateKeyFile" . }}
    defaultMode: 0440
- name: tmp
  emptyDir:
    sizeLimit: 256Mi
{{- end -}}

{{- define "kerrigan.volumeMounts" -}}
- name: github-private-key
  mountPath: {{ include "kerrigan.privateKeyDir" . }}
  readOnly: true
- name: tmp
  mountPath: /tmp
{{- end -}}

{{/* What every Kerrigan pod's spec shares. */}}
{{- define "kerrigan.podSpec" -}}
automountServiceAccountToken: false
# Service links would set KERRIGAN_PORT=tcp://... for a Service named kerrigan, which Kerrigan refuses.
enableServiceLinks: false
{{- with .Values.serviceAccountName }}
serviceAccountName: {{ . }}
{{- end }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
volumes:
  {{- include "kerrigan.volumes" . | nindent 2 }}
{{- end -}}

{{/* Checksums that roll the pods when the chart's Secret or the settings change. */}}
{{- define "kerrigan.checksums" -}}
checksum/config: {{ toJson .Values.config | sha256sum }}
{{- if not .Values.secret.existingSecret }}
checksum/secret: {{ toJson (dict "settings" .Values.secret.settings "key" .Values.secret.githubPrivateKey) | sha256sum }}
{{- end }}
{{- end -}}

{{/* prometheus.io/* annotations for a pod that serves /metrics on `port`. */}}
{{- define "kerrigan.scrapeAnnotations" -}}
prometheus.io/scrape: "true"
prometheus.io/port: {{ .port | quote }}
prometheus.io/path: /metrics
{{- end -}}
