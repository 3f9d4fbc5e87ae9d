#!/usr/bin/env bash
# Install peer benchmark tools used by virtperf: iperf3 (Debian main) and
# netperf (Debian non-free, fetched via a private, throw-away apt config so
# the system apt sources are never modified). Idempotent: re-running only
# reports what is already present.
set -euo pipefail

export DEBIAN_FRONTEND=noninteractive
SUITE=bookworm

if [[ $(id -u) -ne 0 ]]; then
    echo "install-peers: must run as root" >&2
    exit 1
fi

# --- mirror discovery -------------------------------------------------------
# Print the first URI of the deb822 stanza whose Suites lists "$SUITE"
# (i.e. the main archive, not -security/-updates).
mirror_from_deb822() {
    awk -v suite="$SUITE" '
        function flush() {
            if (uris != "" && has_suite && found == "") found = uris
            uris = ""; has_suite = 0
        }
        /^[[:space:]]*$/ { flush(); next }
        /^[[:space:]]*#/ { next }
        tolower($1) == "uris:"   { uris = $2; next }
        tolower($1) == "suites:" { for (i = 2; i <= NF; i++) if ($i == suite) has_suite = 1; next }
        END { flush(); if (found != "") print found }
    ' "$1"
}

# Same, for one-line-style sources.list ("deb [opts] URI suite comp...").
mirror_from_list() {
    awk -v suite="$SUITE" '
        $1 != "deb" { next }
        {
            i = 2
            if ($i ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
            if ($(i + 1) == suite) { print $i; exit }
        }
    ' "$1"
}

find_mirror() {
    local uri=""
    if [[ -f /etc/apt/sources.list.d/debian.sources ]]; then
        uri=$(mirror_from_deb822 /etc/apt/sources.list.d/debian.sources)
    elif [[ -f /etc/apt/sources.list ]]; then
        uri=$(mirror_from_list /etc/apt/sources.list)
    fi
    if [[ -z $uri ]]; then
        echo "install-peers: cannot determine Debian mirror URI from apt sources" >&2
        return 1
    fi
    printf '%s\n' "${uri%/}"
}

# --- iperf3 -----------------------------------------------------------------
install_iperf3() {
    if command -v iperf3 >/dev/null 2>&1; then
        echo "iperf3: already installed ($(iperf3 --version 2>/dev/null | head -n1)), nothing to do"
        return
    fi
    local note=""
    # Refresh indexes only if apt knows no installable candidate.
    # (Capture first: "cmd | grep -q" can fail under pipefail via SIGPIPE.)
    local policy
    policy=$(apt-cache policy iperf3 2>/dev/null || true)
    if [[ $policy != *"Candidate: "[0-9]* ]]; then
        apt-get update -qq
        note=" (after apt-get update)"
    fi
    apt-get install -y -qq --no-install-recommends iperf3 >/dev/null
    echo "iperf3: installed $(dpkg-query -W -f='${Version}' iperf3) from Debian main${note}"
}

# --- netperf ----------------------------------------------------------------
install_netperf() {
    if command -v netperf >/dev/null 2>&1 && command -v netserver >/dev/null 2>&1; then
        echo "netperf: already installed ($(dpkg-query -W -f='${Version}' netperf 2>/dev/null || echo 'not via dpkg')), nothing to do"
        return
    fi

    local mirror tmp
    mirror=$(find_mirror)
    tmp=$(mktemp -d /tmp/install-peers.XXXXXX)
    # shellcheck disable=SC2064
    trap "rm -rf '$tmp'" EXIT

    mkdir -p "$tmp/lists/partial" "$tmp/cache/archives/partial"
    # Let apt's unprivileged download sandbox user write there (avoids
    # "Download is performed unsandboxed as root" warnings).
    if id _apt >/dev/null 2>&1; then
        chmod 0755 "$tmp"
        chown _apt "$tmp" "$tmp/lists/partial" "$tmp/cache/archives/partial"
    fi
    printf 'deb %s %s non-free\n' "$mirror" "$SUITE" >"$tmp/sources.list"

    # Private source list, no sources.list.d, private list + cache dirs:
    # nothing under /etc/apt, /var/lib/apt/lists or /var/cache/apt is touched.
    local -a aptopts=(
        -o "Dir::Etc::SourceList=$tmp/sources.list"
        -o "Dir::Etc::SourceParts=-"
        -o "Dir::State::Lists=$tmp/lists"
        -o "Dir::Cache=$tmp/cache"
    )
    apt-get "${aptopts[@]}" -qq update
    (cd "$tmp" && apt-get "${aptopts[@]}" -qq download netperf)

    local deb
    deb=$(find "$tmp" -maxdepth 1 -name 'netperf_*.deb' -print -quit)
    if [[ -z $deb ]]; then
        echo "install-peers: netperf .deb was not downloaded" >&2
        return 1
    fi

    local note=""
    if ! dpkg -i "$deb" >/dev/null 2>&1; then
        # Pull missing dependencies from the normal (main) sources.
        apt-get install -y -qq -f >/dev/null
        note=" (deps fixed via apt-get -f)"
    fi
    if [[ $(dpkg-query -W -f='${Status}' netperf 2>/dev/null || true) != "install ok installed" ]]; then
        echo "install-peers: netperf installation failed" >&2
        return 1
    fi
    # The package's postinst runs "invoke-rc.d netperf start" (sysv init
    # script, NETSERVER_ENABLE check is broken so it is always on). Where
    # policy-rc.d does not forbid it, a netserver now listens on *:12865.
    if pgrep -x netserver >/dev/null 2>&1; then
        echo "install-peers: warning: package started netserver (pid $(pgrep -x netserver | tr '\n' ' ')), port 12865 may be taken" >&2
    fi
    echo "netperf: installed $(dpkg-query -W -f='${Version}' netperf) from the system mirror's ${SUITE}/non-free component via a private apt config + dpkg -i${note}"
}

install_iperf3
install_netperf
