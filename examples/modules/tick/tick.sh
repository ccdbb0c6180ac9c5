#!/bin/sh
# A steady heartbeat: each printed line resets the idle clock.
i=1
while [ "$i" -le 60 ]; do
	echo "tick $i of 60"
	sleep 1
	i=$((i + 1))
done
warden hook log --level success "ticked for a minute"
