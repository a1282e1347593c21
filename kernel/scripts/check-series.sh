#!/bin/bash
# check-series.sh: static checks of kernel/patches against the unpacked tree
# ($KQ_WORK/tree, patched by fetch.sh).  Prints KQ-RESULT lines:
#   series.patch-p1    the series applies with patch -p1 to the pristine files
#   series.git-am      the series applies with git am, commit by commit
#   series.checkpatch.NNNN  scripts/checkpatch.pl --strict: 0 errors
set -uo pipefail
. "$(dirname "$(realpath "$0")")/lib.sh"
T=$KQ_WORK/tree
res() { echo "KQ-RESULT series.$1 $2 ${*:3}"; }
mapfile -t S < <(kq_series)
[ ${#S[@]} -gt 0 ] || { res present FAIL "no patches in $KQ_KDIR/patches"; exit 1; }
files=$(grep -h '^+++ b/' "${S[@]}" | sed 's#^+++ b/##; s#\t.*##' | sort -u)
w=$KQ_WORK/series-check; rm -rf "$w"; mkdir -p "$w/pristine"
# pristine copies of the touched files: take them from the patched tree and revert
for f in $files; do mkdir -p "$w/pristine/$(dirname "$f")"; cp "$T/$f" "$w/pristine/$f"; done
ok=1
for ((i=${#S[@]}-1; i>=0; i--)); do
	patch -d "$w/pristine" -p1 -R --batch --quiet < "${S[$i]}" >/dev/null || ok=0
done
[ $ok = 1 ] || { res revert FAIL "cannot revert the series from $T (stale tree?)"; exit 1; }

cp -a "$w/pristine" "$w/p1"; ok=1; why=""
for p in "${S[@]}"; do
	patch -d "$w/p1" -p1 --batch --quiet --forward < "$p" >/dev/null || { ok=0; why="$(basename "$p")"; break; }
done
[ $ok = 1 ] && for f in $files; do cmp -s "$w/p1/$f" "$T/$f" || { ok=0; why="$f differs"; }; done
res patch-p1 "$([ $ok = 1 ] && echo PASS || echo FAIL)" "${#S[@]} patches, ${why:-clean}"

cp -a "$w/pristine" "$w/am"; ok=1; why=""
(
	cd "$w/am" && git init -q && git add -A &&
	git -c user.name=kq -c user.email=kq@localhost commit -qm pristine &&
	git -c user.name=kq -c user.email=kq@localhost am -q "${S[@]}"
) >"$w/am.log" 2>&1 || { ok=0; why=$(head -3 "$w/am.log" | tr '\n' ' '); }
[ $ok = 1 ] && for f in $files; do cmp -s "$w/am/$f" "$T/$f" || { ok=0; why="$f differs"; }; done
n=$(git -C "$w/am" rev-list --count HEAD 2>/dev/null || echo 0)
res git-am "$([ $ok = 1 ] && echo PASS || echo FAIL)" "$((n - 1)) commits, ${why:-clean}"

for p in "${S[@]}"; do
	out=$(cd "$T" && perl scripts/checkpatch.pl --strict --no-summary --terse "$p" 2>&1)
	tot=$(cd "$T" && perl scripts/checkpatch.pl --strict "$p" 2>&1 | grep '^total:')
	e=$(echo "$tot" | sed -n 's/total: \([0-9]*\) errors.*/\1/p')
	res "checkpatch.$(basename "$p" | cut -c1-4)" "$([ "${e:-1}" = 0 ] && echo PASS || echo FAIL)" \
		"$(basename "$p"): ${tot:-checkpatch did not run}"
	[ -z "$out" ] || echo "$out" | sed 's/^/KQ-INFO checkpatch: /'
done
rm -rf "$w"
