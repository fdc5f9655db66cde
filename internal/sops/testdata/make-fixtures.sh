#!/bin/sh
# Remakes the encrypted fixtures in this directory from plain/ with the real
# sops, so that the tests check sluice's decryption against what sops writes,
# not against sluice's own idea of the format. Run it from this directory:
#
#	sh make-fixtures.sh
#
# SOPS may name a sops binary of the same version instead (`go install
# github.com/getsops/sops/v3/cmd/sops@v3.13.3` builds one). Every run draws
# new data keys, so the files change entirely; the tests depend on none of
# their bytes, only on their plaintext (plain/).
set -eu

SOPS=${SOPS:-"go run github.com/getsops/sops/v3/cmd/sops@v3.13.3"}
TEST=$(sed -n 's/^# public key: //p' keys/test.agekey)
SECOND=$(sed -n 's/^# public key: //p' keys/second.agekey)
HYBRID=$(sed -n 's/^# public key: //p' keys/hybrid.agekey)

enc() { # enc OUT [sops flags...] IN
	out=$1
	shift
	$SOPS encrypt "$@" >"$out"
}

enc app.json --age "$TEST" plain/app.json
enc app.env --age "$TEST" plain/app.env
enc app.yaml --age "$TEST" plain/app.yaml
enc nested.json --age "$TEST" plain/nested.json
enc regex.json --age "$TEST" --encrypted-regex '^(PASSWORD|TOKEN)$' plain/regex.json
$SOPS --mac-only-encrypted encrypt --age "$TEST" --encrypted-regex '^(PASSWORD|TOKEN)$' plain/regex-mac-only.json >regex-mac-only.json
enc unencrypted-regex.env --age "$TEST" --unencrypted-regex '^PUBLIC_' plain/unencrypted-regex.env
enc encrypted-suffix.yaml --age "$TEST" --encrypted-suffix _secret plain/encrypted-suffix.yaml
enc two-documents.yaml --age "$TEST" plain/two-documents.yaml
enc two-recipients.json --age "$TEST,$SECOND" plain/two-recipients.json
enc hybrid.json --age "$HYBRID" plain/hybrid.json
enc duplicate.env --age "$TEST" plain/duplicate.env
enc equals-key.json --age "$TEST" plain/equals-key.json

# Shamir's secret sharing takes key groups, which only a config file gives.
cat >shamir.sops.yaml <<CONFIG
creation_rules:
  - shamir_threshold: 2
    key_groups:
      - age: [$TEST]
      - age: [$SECOND]
CONFIG
$SOPS --config shamir.sops.yaml encrypt plain/shamir.json >shamir.json
rm shamir.sops.yaml

# Each file decrypts with sops itself, MAC checked.
for f in app.json app.env app.yaml nested.json regex.json regex-mac-only.json \
	unencrypted-regex.env encrypted-suffix.yaml two-documents.yaml two-recipients.json \
	duplicate.env equals-key.json; do
	SOPS_AGE_KEY_FILE=keys/test.agekey $SOPS decrypt "$f" >/dev/null
done
SOPS_AGE_KEY_FILE=keys/hybrid.agekey $SOPS decrypt hybrid.json >/dev/null

# The environment sops exec-env gives a process for each file sluice reads
# whole, NUL-separated as env -0 prints it (less the PWD the shell adds):
# the tests expect exactly these variables from sluice.
mkdir -p exec-env
for f in app.json app.env app.yaml regex.json regex-mac-only.json \
	unencrypted-regex.env encrypted-suffix.yaml two-recipients.json; do
	SOPS_AGE_KEY_FILE=keys/test.agekey $SOPS exec-env --pristine "$f" 'exec env -u PWD -0' >"exec-env/$f.nul"
done
SOPS_AGE_KEY_FILE=keys/hybrid.agekey $SOPS exec-env --pristine hybrid.json 'exec env -u PWD -0' >exec-env/hybrid.json.nul
