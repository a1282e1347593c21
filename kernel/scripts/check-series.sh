#!/bin/bash
# check-series.sh: static checks of kernel/patches against the unpacked tree
# ($KQ_WORK/tree, patched by fetch.sh).  Prints KQ-RESULT lines:
#   series.patch-p1    the series applies with patch -p1 to the pristine files
#   series.git-am      the series applies with git am, commit by commit
#   series.checkpatch.NNNN  scripts/checkpatch.pl --strict: no error, warning or check
#                           (0000 = the cover letter), but for the selftest patches' expected warnings
#   series.cover-letter     0000-cover-letter.patch: [PATCH 0/N], every patch in its shortlog
#   series.allnoconfig-keeps-abi  without EXPERT the options cannot be lost: allnoconfig
#                           keeps PROC_PID_STAT_CR and PRCTL_SET_MM_ARGS (long-standing ABI)
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

# checkpatch --strict: no error, no check, and no warning but the two a
# reviewer expects of the selftest patches, each with its reason (docs/kernel.md)
allowed="0005:FILE_PATH_CHANGES 0005:ENOSYS 0006:FILE_PATH_CHANGES 0008:ENOSYS"
for p in "$(kq_cover)" "${S[@]}"; do
	n=$(basename "$p" | cut -c1-4)
	out=$(cd "$T" && perl scripts/checkpatch.pl --strict --terse --show-types --no-summary "$p" 2>&1)
	tot=$(cd "$T" && perl scripts/checkpatch.pl --strict "$p" 2>&1 | grep '^total:')
	bad=$(echo "$out" | grep -E ': (ERROR|WARNING|CHECK):' | while IFS= read -r l; do
		t=$(echo "$l" | sed -n 's/.*: \(ERROR\|WARNING\|CHECK\):\([A-Z_0-9]*\):.*/\1:\2/p')
		case " $allowed " in *" $n:${t#WARNING:} "*) [ "${t%%:*}" = WARNING ] && continue ;; esac
		echo "$t"
	done | sort -u | tr '\n' ' ')
	[ -n "$tot" ] || bad="checkpatch did not run"
	res "checkpatch.$n" "$([ -z "$bad" ] && echo PASS || echo FAIL)" \
		"$(basename "$p"): $tot${bad:+; not allowed: $bad}"
	[ -z "$out" ] || echo "$out" | sed 's/^/KQ-INFO checkpatch: /'
done
# the cover letter, as git format-patch --cover-letter makes it
c=$(kq_cover); ok=1; why=""
if [ ! -f "$c" ]; then ok=0; why="no $(basename "$c")"
else
	grep -q "^Subject: \[PATCH 0/${#S[@]}\] " "$c" || { ok=0; why="no [PATCH 0/${#S[@]}] subject"; }
	! grep -q '\*\*\* \(SUBJECT\|BLURB\) HERE \*\*\*' "$c" || { ok=0; why="the template's placeholders are left"; }
	for p in "${S[@]}"; do
		subj=$(sed -n 's/^Subject: \[PATCH [0-9]*\/[0-9]*\] //p' "$p" | cut -c1-40)
		grep -qF "$subj" "$c" || { ok=0; why="$(basename "$p") is not in the shortlog"; }
	done
fi
res cover-letter "$([ $ok = 1 ] && echo PASS || echo FAIL)" "${why:-$(basename "$c"): [PATCH 0/${#S[@]}], ${#S[@]} patches listed}"

# long-standing ABI (as MULTIUSER, FHANDLE): visible only with EXPERT, so allnoconfig keeps it
ok=1; why=""
make -s -C "$T" O="$w/allno" allnoconfig >"$w/allno.log" 2>&1 || { ok=0; why="allnoconfig failed"; }
for o in PROC_PID_STAT_CR PRCTL_SET_MM_ARGS; do
	grep -qx "CONFIG_$o=y" "$w/allno/.config" 2>/dev/null || { ok=0; why="$why $o is off"; }
done
grep -qx "CONFIG_EXPERT=y" "$w/allno/.config" 2>/dev/null && { ok=0; why="EXPERT is on in allnoconfig?"; }
res allnoconfig-keeps-abi "$([ $ok = 1 ] && echo PASS || echo FAIL)" "allnoconfig (EXPERT off):${why:- PROC_PID_STAT_CR=y PRCTL_SET_MM_ARGS=y}"
rm -rf "$w"
