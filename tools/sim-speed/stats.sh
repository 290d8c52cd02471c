# Order statistics of the numbers given as arguments, for the speed scripts beside this
# file (sourced, not run).
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
# quart Q X...: the Q-quantile (0..1) of X..., by the nearest lower rank.
quart() { printf '%s\n' "${@:2}" | sort -g | awk -v q="$1" '{ v[NR] = $1 } END { print v[int(q * (NR - 1)) + 1] }'; }
best() { printf '%s\n' "$@" | sort -g | tail -1; }
