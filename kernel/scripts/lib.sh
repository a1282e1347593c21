# shellcheck shell=bash
# Common settings for the kernel rig; sourced by the other scripts.
# Everything big lives in $KQ_WORK (outside the repo, never committed).
KQ_HERE=$(dirname "$(realpath "${BASH_SOURCE[0]}")")
KQ_KDIR=$(dirname "$KQ_HERE")               # <repo>/kernel
# shellcheck disable=SC2034 # used by the scripts that source this file
KQ_REPO=$(dirname "$KQ_KDIR")               # <repo>
KQ_WORK=${KQ_WORK:-/var/cache/amber-kernel}
KQ_JOBS=${KQ_JOBS:-2}
KQ_PKG=${KQ_PKG:-linux-source-6.12}
KQ_STAMP0=$(date +%s)
kq_stage() { echo "KQ-STAGE $(( $(date +%s) - KQ_STAMP0 ))s $*"; }
kq_die() { echo "KQ-ERROR $*" >&2; exit 1; }
# the series, in order, without its cover letter (0000-cover-letter.patch has no diff)
kq_series() { ls "$KQ_KDIR"/patches/[0-9][0-9][0-9][0-9]-*.patch 2>/dev/null | grep -v '/0000-' | sort; }
kq_cover() { echo "$KQ_KDIR/patches/0000-cover-letter.patch"; }
# the tree's key: the diffs only, so a change of commit messages alone rebuilds nothing
kq_series_hash() { kq_series | xargs sed -s -n '/^diff --git /,$p' | sha256sum | cut -c1-16; }
