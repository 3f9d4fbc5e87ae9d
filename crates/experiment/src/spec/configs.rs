//! `[[config]]` tables: knobs, socket options, CPUs, placements and their set-up.

use super::*;

/// One `[[config]]`: one config, or one per combination of a guest table's lists
/// (`virtio = { rx_queue_size = [256, 1024] }`), named `NAME:KEY=VALUE,…`.
pub(super) fn config(text: &str, c: &Spanned<RawConfig>) -> Result<Vec<Config>, SpecError> {
    let base = one_config(text, c)?;
    let Some(Placement::Guest(direction, opts)) = &base.placement else {
        return Ok(vec![base]);
    };
    let r = c.get_ref();
    let Some(g) = &r.guest else {
        return Ok(vec![base]);
    };
    let span = g.span();
    let g = g.get_ref();
    // Axes: (label, what it sets, its values).
    enum Sets {
        Virtio(String),
        Module(String),
        Cmdline,
    }
    let mut axes: Vec<(String, Sets, Vec<String>)> = Vec::new();
    for (k, v) in &g.virtio {
        let vals = v
            .to_vec()
            .iter()
            .map(|x| match x {
                KnobVal::Bool(b) => if *b { "on" } else { "off" }.to_string(),
                other => other.text(),
            })
            .collect();
        axes.push((k.clone(), Sets::Virtio(k.clone()), vals));
    }
    for (k, v) in &g.modules {
        axes.push((
            k.clone(),
            Sets::Module(k.clone()),
            v.to_vec().iter().map(KnobVal::text).collect(),
        ));
    }
    if let Some(c) = &g.cmdline {
        axes.push(("cmdline".into(), Sets::Cmdline, c.to_vec()));
    }
    if let Some((k, _, _)) = axes.iter().find(|(_, _, v)| v.is_empty()) {
        return err(
            text,
            span,
            format!("guest {k}: an empty list sweeps nothing"),
        );
    }
    let combos: usize = axes.iter().map(|(_, _, v)| v.len()).product();
    if combos > 64 {
        return err(
            text,
            span,
            format!("the guest table's lists make {combos} configs (at most 64: each boots its own guests)"),
        );
    }
    let mut out = Vec::new();
    for i in 0..combos {
        let mut o = (**opts).clone();
        let mut label = Vec::new();
        let mut rest = i;
        for (name, sets, vals) in &axes {
            let v = &vals[rest % vals.len()];
            rest /= vals.len();
            match sets {
                Sets::Virtio(k) => {
                    o.virtio.insert(k.clone(), v.clone());
                }
                Sets::Module(k) => {
                    o.modules.insert(k.clone(), v.clone());
                }
                Sets::Cmdline => o.cmdline = Some(v.clone()).filter(|c| !c.trim().is_empty()),
            }
            if vals.len() > 1 {
                label.push(format!("{name}={v}"));
            }
        }
        virtperf_place::guest::check_cmdline(o.cmdline.as_deref())
            .or_else(|e| err(text, span.clone(), format!("{e}")))?;
        virtperf_place::guest::module_params(&o.modules)
            .or_else(|e| err(text, span.clone(), format!("{e}")))?;
        let mut cfg = base.clone();
        if !label.is_empty() {
            cfg.name = format!("{}:{}", base.name, label.join(","));
        }
        cfg.placement = Some(Placement::Guest(*direction, Box::new(o)));
        out.push(cfg);
    }
    Ok(out)
}

/// Names are printed on terminals and in reports: a control character (an escape sequence
/// that recolours or retitles the terminal) has no place in one.
pub(super) const CONTROL_IN_NAME: &str =
    "a name must not contain control characters (escape sequences, tabs, newlines)";

/// A config's kernel knobs: sysctls, module parameters, network device files, cpuidle
/// switches and the cpuidle governor, each name checked at its line.
fn knobs_of(text: &str, r: &RawConfig) -> Result<Vec<(Knob, String)>, SpecError> {
    let mut knobs = Vec::new();
    // A value is one line of a kernel file: a newline would write a second value the
    // kernel parses or refuses as it likes, and an escape sequence would reach the
    // terminal in the plan and the run's knob list. Tabs separate fields (`tcp_rmem`).
    let value = |k: &str, v: &Spanned<super::raw::KnobVal>| {
        let t = v.get_ref().text();
        if t.chars().any(|c| c.is_control() && c != '\t') {
            return err(
                text,
                v.span(),
                format!("the value of {k} must be one line without control characters (newlines, escape sequences)"),
            );
        }
        Ok(t)
    };
    for (k, v) in &r.sysctl {
        let knob = Knob::sysctl(k).or_else(|m| err(text, v.span(), m))?;
        knobs.push((knob, value(k, v)?));
    }
    for (k, v) in &r.module {
        let knob = Knob::module_param(k).or_else(|m| err(text, v.span(), m))?;
        knobs.push((knob, value(k, v)?));
    }
    for (k, v) in &r.netdev {
        let knob = Knob::netdev(k).or_else(|m| err(text, v.span(), m))?;
        knobs.push((knob, value(k, v)?));
    }
    if let Some(states) = &r.cpuidle_disable {
        for &st in states.get_ref() {
            let ks = Knob::cpuidle_disable_all(st);
            if ks.is_empty() {
                return err(
                    text,
                    states.span(),
                    "no CPUs found under /sys/devices/system/cpu",
                );
            }
            knobs.extend(ks.into_iter().map(|k| (k, "1".to_string())));
        }
    }
    if let Some(g) = &r.cpuidle_governor {
        let name = g.get_ref().trim();
        virtperf_machine::knob::check_governor(name).or_else(|m| err(text, g.span(), m))?;
        knobs.push((Knob::cpuidle_governor(), name.to_string()));
    }
    Ok(knobs)
}

pub(super) fn one_config(text: &str, c: &Spanned<RawConfig>) -> Result<Config, SpecError> {
    let r = c.get_ref();
    let name = r.name.get_ref().trim().to_string();
    if name.is_empty() {
        return err(text, r.name.span(), "config name must not be empty");
    }
    if name.chars().any(char::is_control) {
        return err(text, r.name.span(), CONTROL_IN_NAME);
    }
    let knobs = knobs_of(text, r)?;
    let sock = socket_of(text, r)?;
    let cpus = match &r.cpus {
        Some(s) => Some(parse::cpus(s.get_ref()).or_else(|m| err(text, s.span(), m))?),
        None => None,
    };
    let placement = match &r.placement {
        None => None,
        Some(p) => match p
            .get_ref()
            .parse()
            .or_else(|e| err(text, p.span(), format!("{e}")))?
        {
            Placement::Local => None,
            placed => Some(placement_settings(text, r, placed)?),
        },
    };
    if let (Some(g), false) = (&r.guest, matches!(placement, Some(Placement::Guest(..)))) {
        return err(
            text,
            g.span(),
            "a guest table needs placement = \"guest…\" in the same config".to_string(),
        );
    }
    if let (Some(s), false) = (&r.ssh, matches!(placement, Some(Placement::Ssh(..)))) {
        return err(
            text,
            s.span(),
            "an ssh table needs placement = \"ssh:USER@HOST\" in the same config".to_string(),
        );
    }
    let load = load_of(text, r)?;
    let family = family_of(text, r)?;
    let wait = match &r.wait {
        Some(w) => {
            Some(virtperf_lab::parse::wait(w.get_ref()).or_else(|m| err(text, w.span(), m))?)
        }
        None => None,
    };
    let cpu_dma_latency = match &r.cpu_dma_latency {
        Some(v) => Some(
            u32::try_from(*v.get_ref())
                .ok()
                .filter(|x| *x <= 2_000_000)
                .ok_or(())
                .or_else(|()| {
                    err(
                        text,
                        v.span(),
                        "cpu_dma_latency is a latency bound in µs, 0 to 2000000",
                    )
                })?,
        ),
        None => None,
    };
    Ok(Config {
        name,
        description: r.description.clone(),
        knobs,
        sock,
        cpus,
        placement,
        setup: r.setup.clone(),
        teardown: r.teardown.clone(),
        load,
        family,
        wait,
        cpu_dma_latency,
    })
}

/// A config's `load = "streams=N[,reverse]"` (the command's `pairs=` is refused: a spec
/// repeats with `repetitions`).
fn load_of(
    text: &str,
    r: &RawConfig,
) -> Result<Option<virtperf_lab::under_load::UnderLoad>, SpecError> {
    match &r.load {
        None => Ok(None),
        Some(l) if l.get_ref().contains("pairs") => err(
            text,
            l.span(),
            "a config's load takes streams=N[,reverse]; its trials repeat with `repetitions`",
        ),
        Some(l) => virtperf_lab::under_load::parse(l.get_ref())
            .map(Some)
            .or_else(|m| err(text, l.span(), format!("load: {m}"))),
    }
}

/// A config's `family = "ipv4" | "ipv6"` (the workloads' `-4`/`-6`).
fn family_of(text: &str, r: &RawConfig) -> Result<Option<virtperf_lab::plan::Family>, SpecError> {
    use virtperf_lab::plan::Family;
    let Some(f) = &r.family else {
        return Ok(None);
    };
    match f.get_ref().as_str() {
        "ipv4" | "4" => Ok(Some(Family::V4)),
        "ipv6" | "6" => Ok(Some(Family::V6)),
        other => err(
            text,
            f.span(),
            format!("family {other:?}: \"ipv4\" or \"ipv6\" (the workloads' -4/-6)"),
        ),
    }
}

/// A config's `socket` table as the plan carries it, each option checked.
fn socket_of(text: &str, r: &RawConfig) -> Result<SockOpts, SpecError> {
    Ok(match &r.socket {
        Some(s) => {
            let raw = s.get_ref();
            let buf = |v: &Option<SizeVal>| -> Result<Option<u32>, SpecError> {
                match v {
                    Some(x) => parse::size32(&x.text())
                        .map(Some)
                        .or_else(|m| err(text, s.span(), m)),
                    None => Ok(None),
                }
            };
            let congestion = match &raw.congestion {
                Some(c) => {
                    Some(virtperf_lab::parse::congestion(c).or_else(|m| err(text, s.span(), m))?)
                }
                None => None,
            };
            let o = SockOpts {
                nodelay: raw.nodelay,
                busy_poll_us: raw.busy_poll_us,
                sndbuf: buf(&raw.sndbuf)?,
                rcvbuf: buf(&raw.rcvbuf)?,
                congestion,
                mss: raw.mss,
                tos: raw.tos,
                mptcp: raw.mptcp.filter(|m| *m),
            };
            o.validate().or_else(|m| err(text, s.span(), m))?;
            o
        }
        None => SockOpts::default(),
    })
}

/// A placement with the settings its config gives it: the guest table, the ssh table, the
/// token; a remote agent without a port is on the default one.
pub(super) fn placement_settings(
    text: &str,
    r: &RawConfig,
    mut placed: Placement,
) -> Result<Placement, SpecError> {
    match &mut placed {
        Placement::Guest(_, opts) => **opts = guest_opts(text, r)?,
        Placement::Ssh(t) => {
            if let Some(s) = &r.ssh {
                t.identity = s.get_ref().key.as_ref().map(Into::into);
                t.options = s.get_ref().options.clone();
            }
        }
        Placement::Remote { port, token, .. } => {
            port.get_or_insert(virtperf_wire::DEFAULT_PORT);
            token.clone_from(&r.token);
        }
        Placement::Local | Placement::Netns(..) => {}
    }
    Ok(placed)
}

/// The guest settings of a config (`guest = { vcpus = 2, … }`), defaults for the rest.
pub(super) fn guest_opts(
    text: &str,
    r: &RawConfig,
) -> Result<virtperf_place::guest::GuestOpts, SpecError> {
    let mut o = virtperf_place::guest::GuestOpts::default();
    let Some(g) = &r.guest else {
        return Ok(o);
    };
    let span = g.span();
    let g = g.get_ref();
    o.kernel = g.kernel.as_ref().map(Into::into);
    o.kernel_modules = g.kernel_modules.as_ref().map(Into::into);
    o.binary = g.binary.as_ref().map(Into::into);
    if let Some(v) = g.vcpus {
        if v == 0 || v > 64 {
            return err(
                text,
                span.clone(),
                format!("guest vcpus must be 1..64 (got {v})"),
            );
        }
        o.vcpus = v;
    }
    if let Some(m) = g.mem {
        if m < 128 {
            return err(
                text,
                span.clone(),
                format!("guest mem must be at least 128 (MiB; got {m})"),
            );
        }
        o.mem_mib = m;
    }
    if let Some(c) = &g.vcpu_cpus {
        o.vcpu_cpus = c.clone();
    }
    if let Some(v) = g.vhost {
        o.vhost = v;
    }
    if let Some(a) = &g.accel {
        o.accel = a
            .parse()
            .or_else(|m: anyhow::Error| err(text, span.clone(), m))?;
    }
    if let Some(t) = &g.boot_timeout {
        o.boot_timeout = parse::duration(t).or_else(|m| err(text, span.clone(), m))?;
    }
    if let Some(n) = &g.net {
        o.net = n
            .parse()
            .or_else(|m: anyhow::Error| err(text, span.clone(), m))?;
    }
    Ok(o)
}
