#!/bin/sh
# Every stdout line becomes a stream line; no protocol needed.
exec seq -f 'line %g of 200000: the quick brown fox jumps over the lazy dog' 1 200000
