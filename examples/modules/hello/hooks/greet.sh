#!/bin/sh
# greet: say hello to the `target` input, once the operator agrees.
#
# A hook talks to warden with `warden hook ...` (warden is first on PATH
# inside the jail). Each helper exits 0 on success, 1 when the engine said
# no (the reason is on stderr) and 2 on a usage mistake, so `set -e` stops
# the hook at the first failure.
set -eu

# Plain output needs no protocol: stdout lines are info, stderr lines warn.
echo "greet starting in $(pwd)"
echo "this line went to stderr, so it shows as a warning" >&2

# Inputs come from the run's context; a KEY prints just that value.
target=$(warden hook context inputs.target)
warden hook log "about to greet $target"

# Config may be unset: `get` prints nothing then.
word=$(warden hook config get greeting_word)
word=${word:-Hello}
warden hook log --level debug "greeting word: $word"

# A hook-owned secret: made here, sealed by warden, never printed.
# `-` reads the value from stdin, which keeps it out of `ps`.
head -c16 /dev/urandom | od -An -tx1 | tr -d ' \n' |
	warden hook secret set visit_token -
warden hook log "stored a fresh visit_token"

# JSON strings need their quotes and backslashes escaped.
json_str() {
	printf '"%s"' "$(printf '%s' "$1" | sed 's/[\\"]/\\&/g')"
}

# Ask the operator; the answer is the JSON value true or false.
answer=$(warden hook call operator confirm "[$(json_str "Greet $target?")]")
if [ "$answer" = true ]; then
	greeting="$word, $target!"
	warden hook log --level success "$greeting"
else
	greeting="(not greeted: the operator said no)"
	warden hook log --level warn "the operator said no"
fi

# The outputs declared in module.yaml, with their types.
warden hook result "{\"greeting\":$(json_str "$greeting"),\"confirmed\":$answer}"
