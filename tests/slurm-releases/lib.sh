# shellcheck shell=bash
# Chroots of newer Debian releases, each with its own Slurm, for tests/slurm-releases/run.
# Sourced (bash, set -euo pipefail). Needs root, debootstrap, flock, mount.
#
# A chroot lives in $CMLB_RELEASES_CACHE/slurm-<codename> (default /var/cache/cmlb-tests),
# is built once per machine by debootstrap from the Debian mirror this machine's apt uses, and is
# complete only when its stamp file exists (an interrupted build is thrown away and redone).
# While in use it holds an exclusive lock (two runs never mount into the same tree) and has
# proc, sys, dev and the repository mounted; rel_umount_all undoes every mount under it.

REL_CACHE=${CMLB_RELEASES_CACHE:-/var/cache/cmlb-tests}
REL_STAMP=.cmlb-chroot-complete
# What the end-to-end suite needs inside: Slurm + munge, the headers the plugin is built
# against, a C compiler (static libc included) and OpenMP for the test programs, hwloc for cmlb.
REL_PACKAGES=(slurmctld slurmd slurm-client munge libslurm-dev
              gcc libc6-dev libgomp1 libhwloc15 hwloc-nox libudev1 util-linux procps)

rel_say() { echo "slurm-releases: $*" >&2; }
rel_die() { rel_say "error: $*"; exit 1; }

# The mirror this machine's apt uses for its own Debian release (first match), from
# /etc/apt/sources.list(.d): one-line "deb URI SUITE" entries and deb822 .sources files.
# CMLB_DEBIAN_MIRROR overrides it.
rel_mirror() {
    if [ -n "${CMLB_DEBIAN_MIRROR:-}" ]; then echo "$CMLB_DEBIAN_MIRROR"; return; fi
    local code m="" f
    code=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
    [ -n "$code" ] || rel_die "no VERSION_CODENAME in /etc/os-release; set CMLB_DEBIAN_MIRROR"
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -f "$f" ] || continue
        m=$(awk -v c="$code" '$1 == "deb" {
                i = 2; if ($i ~ /^\[/) { while (i < NF && $i !~ /\]$/) i++; i++ }
                if ($(i + 1) == c) { print $i; exit } }' "$f")
        [ -z "$m" ] || break
    done
    if [ -z "$m" ]; then
        for f in /etc/apt/sources.list.d/*.sources; do
            [ -f "$f" ] || continue
            m=$(awk -v c="$code" 'BEGIN { RS = ""; FS = "\n" }
                { types = ""; uris = ""; suites = ""; enabled = "yes"
                  for (i = 1; i <= NF; i++) {
                      if ($i ~ /^Types:/) types = $i
                      if ($i ~ /^URIs:/) uris = $i
                      if ($i ~ /^Suites:/) suites = $i
                      if ($i ~ /^Enabled:/) enabled = tolower($i) }
                  if (types ~ /[ \t]deb([ \t]|$)/ && enabled !~ /no/ && (" " suites " ") ~ ("[ \t]" c "[ \t]")) {
                      sub(/^URIs:[ \t]*/, "", uris); split(uris, u, /[ \t]+/); print u[1]; exit } }' "$f")
            [ -z "$m" ] || break
        done
    fi
    [ -n "$m" ] || rel_die "no 'deb' source for $code in /etc/apt/sources.list(.d); set CMLB_DEBIAN_MIRROR"
    echo "$m"
}

# Mount points at or under DIR, deepest first.
rel_mounts_under() {
    awk -v d="$1" '$2 == d || index($2, d "/") == 1 {print $2}' /proc/self/mounts | sort -r
}

# Unmount everything under DIR (lazily: a lingering process cannot keep it busy).
rel_umount_all() {
    local d=$1 m
    for m in $(rel_mounts_under "$d"); do
        umount -l "$m" 2>/dev/null || rel_say "warning: cannot unmount $m"
    done
    [ -z "$(rel_mounts_under "$d")" ]
}

# End the processes whose root directory is ROOT (daemons a killed test run left in the chroot).
rel_kill_inside() {
    local root=$1 p r pids=()
    for p in /proc/[0-9]*; do
        r=$(readlink "$p/root" 2>/dev/null) || continue
        [ "$r" = "$root" ] && pids+=("${p#/proc/}")
    done
    [ ${#pids[@]} -gt 0 ] || return 0
    rel_say "ending processes left in $root: ${pids[*]}"
    kill -KILL "${pids[@]}" 2>/dev/null || true
}

# Remove a chroot tree, but only when nothing is mounted under it (never into /dev or the repo).
rel_remove_tree() {
    local d=$1
    [ -d "$d" ] || return 0
    rel_umount_all "$d" || rel_die "mounts remain under $d; not removing it"
    rm -rf --one-file-system "$d"
}

# rel_mount ROOT REPO: proc, sys, dev and the repository (read-only, at the same path) in ROOT.
# Every mount is a slave of nothing on the host: nothing mounted inside propagates back.
rel_mount() {
    local root=$1 repo=${2:-}
    mountpoint -q "$root/proc" || mount -t proc proc "$root/proc"
    mountpoint -q "$root/sys" || mount -t sysfs sysfs "$root/sys"
    if ! mountpoint -q "$root/dev"; then
        mount --bind /dev "$root/dev"
        mount --make-rslave "$root/dev"
    fi
    if [ -n "$repo" ] && ! mountpoint -q "$root$repo"; then
        mkdir -p "$root$repo"
        mount --bind "$repo" "$root$repo"
        mount --make-rslave "$root$repo"
        mount -o remount,bind,ro "$root$repo"
    fi
    # Without the host's names slurmctld cannot resolve the node and steps hang 10-75 s.
    cp /etc/hosts "$root/etc/hosts"
}

# rel_in ROOT CMD...: run CMD in the chroot with a clean environment, plus the variables
# named in REL_PASS_ENV; bounded by REL_TIMEOUT seconds when set.
rel_in() {
    local root=$1; shift
    local envs=(PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root
                LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive)
    local v pre=()
    for v in ${REL_PASS_ENV:-}; do
        if [ -n "${!v+x}" ]; then envs+=("$v=${!v}"); fi
    done
    if [ -n "${REL_TIMEOUT:-}" ]; then pre=(timeout -k 10 "$REL_TIMEOUT"); fi
    "${pre[@]}" chroot "$root" /usr/bin/env -i "${envs[@]}" "$@"
}

# rel_apt_conf CODENAME: apt configuration the release needs here.
rel_apt_conf() {
    case "$1" in
        # unstable's Release file reads as expired on these machines (measured 2026-11-24).
        sid|unstable) echo 'Acquire::Check-Valid-Until "false";' ;;
        *) : ;;
    esac
}

# rel_install ROOT: the packages of REL_PACKAGES (mounts must be in place).
rel_install() {
    local root=$1
    REL_TIMEOUT=600 rel_in "$root" apt-get update -qq >"$root/.cmlb-apt.log" 2>&1 \
        || { tail -n 20 "$root/.cmlb-apt.log" >&2; return 1; }
    REL_TIMEOUT=900 rel_in "$root" apt-get install -y -qq --no-install-recommends "${REL_PACKAGES[@]}" \
        >>"$root/.cmlb-apt.log" 2>&1 \
        || { tail -n 20 "$root/.cmlb-apt.log" >&2; return 1; }
    rel_in "$root" apt-get clean
}

# rel_ensure CODENAME: echo the path of a complete chroot of CODENAME, building it if missing
# (or adding packages when REL_PACKAGES grew since it was built). Call with the lock held.
rel_ensure() {
    local code=$1 root="$REL_CACHE/slurm-$1" mirror t0 tmp want
    want=$(printf '%s\n' "${REL_PACKAGES[@]}")
    if [ -f "$root/$REL_STAMP" ]; then
        if [ "$(sed -n '/^packages:/,$p' "$root/$REL_STAMP" | tail -n +2)" != "$want" ]; then
            rel_say "$code: package list changed, installing into the cached chroot"
            rel_mount "$root"
            local rc=0
            rel_install "$root" || rc=$?
            rel_umount_all "$root" || rel_die "cannot unmount $root"
            [ $rc -eq 0 ] || rel_die "$code: apt-get install failed (log: $root/.cmlb-apt.log)"
            rel_write_stamp "$root" "$code"
        fi
        echo "$root"
        return 0
    fi
    command -v debootstrap >/dev/null || rel_die "debootstrap not installed (slurm-conf/install-deps)"
    mirror=$(rel_mirror)
    rel_remove_tree "$root"
    tmp="$REL_CACHE/slurm-$code.partial"
    rel_remove_tree "$tmp"
    mkdir -p "$REL_CACHE"
    t0=$(date +%s)
    rel_say "$code: building the chroot in $root (debootstrap from $mirror, once per machine)"
    # Bounded: a stalled mirror must fail the run, not hang CI.
    if ! timeout -k 10 900 debootstrap --variant=minbase --include=ca-certificates "$code" "$tmp" "$mirror" \
            >"$REL_CACHE/slurm-$code.debootstrap.log" 2>&1; then
        tail -n 20 "$REL_CACHE/slurm-$code.debootstrap.log" >&2
        rel_remove_tree "$tmp" || true
        rel_die "$code: debootstrap failed (log: $REL_CACHE/slurm-$code.debootstrap.log)"
    fi
    rel_umount_all "$tmp" || rel_die "debootstrap left mounts under $tmp"
    # apt inside starts no daemons (munge's postinst would otherwise start a munged).
    printf '#!/bin/sh\nexit 101\n' > "$tmp/usr/sbin/policy-rc.d"
    chmod 755 "$tmp/usr/sbin/policy-rc.d"
    rel_apt_conf "$code" > "$tmp/etc/apt/apt.conf.d/99cmlb-tests"
    local t1 rc=0
    t1=$(date +%s)
    rel_mount "$tmp"
    rel_install "$tmp" || rc=$?
    rel_kill_inside "$(cd "$tmp" && pwd -P)"
    rel_umount_all "$tmp" || rel_die "cannot unmount $tmp"
    [ $rc -eq 0 ] || rel_die "$code: apt-get install failed (log: $tmp/.cmlb-apt.log)"
    rel_write_stamp "$tmp" "$code"
    mv "$tmp" "$root"
    rel_say "$code: chroot ready in $(( $(date +%s) - t0 )) s (debootstrap $(( t1 - t0 )) s, packages $(( $(date +%s) - t1 )) s)"
    echo "$root"
}

rel_write_stamp() { # ROOT CODENAME
    local v
    v=$(chroot "$1" dpkg-query -W -f='${Version}' slurmd 2>/dev/null || echo unknown)
    { echo "codename: $2"; echo "slurmd: $v"; echo "built: $(date -u +%FT%TZ)"
      echo "packages:"; printf '%s\n' "${REL_PACKAGES[@]}"; } > "$1/$REL_STAMP"
}
