#!/usr/bin/env bash
# Make a device call's working tree lighter: leave tracked files that no GPU job reads out of git's index (a device
# call sends tracked and untracked-not-ignored files, 64 MiB in all), and put them back after the calls.
#   bash experiments/travel_light.sh drop [PATH...]   (default: experiments/results and the two small releases, 31 MiB)
#   bash experiments/travel_light.sh drop models/sip-d4/model.safetensors   (to carry a baseline's 36-MB checkpoint)
#   bash experiments/travel_light.sh restore          (always, before the next commit: see below)
# The files stay on disk. While dropped they are staged deletions, so a commit would delete them: `restore` first.
# The dropped paths are listed in .git/sip-travel-light (untracked) and ignored through .git/info/exclude.
set -eu
cd "$(git rev-parse --show-toplevel)"
list=.git/sip-travel-light
exclude=.git/info/exclude
begin="# sip travel-light: begin" end="# sip travel-light: end"

restore() {
    [ -s "$list" ] || { echo "travel-light: nothing dropped"; return 0; }
    xargs -d '\n' git reset -q -- < "$list"
    sed -i "/^$begin\$/,/^$end\$/d" "$exclude"
    echo "travel-light: restored $(wc -l < "$list") path(s) to the index"
    rm -f "$list"
}

drop() {
    [ $# -gt 0 ] || set -- experiments/results models/sip-d4-small models/sip-nd7-small
    [ -s "$list" ] && { echo "travel-light: already dropped ($list); restore first" >&2; exit 1; }
    git ls-files -- "$@" > "$list"
    [ -s "$list" ] || { echo "travel-light: no tracked file under $*" >&2; rm -f "$list"; exit 1; }
    bytes=$(xargs -d '\n' stat -c %s < "$list" | awk '{s += $1} END {print s}')
    xargs -d '\n' git rm -q --cached -- < "$list"
    { echo "$begin"; sed 's|^|/|' "$list"; echo "$end"; } >> "$exclude"
    echo "travel-light: $(wc -l < "$list") file(s), $((bytes / 1048576)) MiB out of the index; run 'restore' before committing"
}

case "${1:-}" in
    drop) shift; drop "$@" ;;
    restore) restore ;;
    *) echo "usage: $0 drop [PATH...] | restore" >&2; exit 2 ;;
esac
