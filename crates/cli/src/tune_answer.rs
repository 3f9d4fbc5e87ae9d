//! `virtperf tune`'s answer in words: the pick and what its cheapness rests on, or why
//! there is none (nothing meets the goals, nothing shown to, nothing costed, or a signal
//! stopped the search short) — the same words the text, the exit's error line and the
//! JSON's decision use.

use virtperf_tune::search::{self, Measured, Pick};

use crate::tune_search::{cpus, cpus_words, figure, Search};

/// The answer: the pick (and what its cost is not told apart from) and what else meets the
/// goals at what CPU, or why nothing is picked; the tuned profile's standing beside it.
pub(crate) fn answer(s: &Search, all: &[Measured]) -> String {
    let goals: Vec<String> = s.goals.iter().map(|g| g.words()).collect();
    let goals = goals.join(" and ");
    let ranked = search::ranked(all, &s.goals, s.max_cpu);
    let (pick, tied, uncosted) = match search::pick(all, &s.goals, s.max_cpu) {
        Pick::Cheapest {
            pick,
            tied,
            uncosted,
        } => (pick, tied, uncosted),
        Pick::NoCost { meeting } => return format!("Answer: {}\n", no_cost(&goals, &meeting)),
        Pick::Nothing => return format!("Answer: {}\n", no_answer(s, all)),
        Pick::Unsure { unsure } => return format!("Answer: {}\n", undecided(s, &unsure)),
        Pick::Cut { cut } => return format!("Answer: {}\n", cut_short(s, &cut)),
    };
    let mut a = format!(
        "Answer: {} meets {goals} at {} — {}",
        pick.config.name,
        cpus_words(pick),
        pick.config.what()
    );
    if !tied.is_empty() {
        let t: Vec<String> = tied
            .iter()
            .map(|m| format!("{} at {}", m.config.name, cpus(m)))
            .collect();
        a.push_str(&format!(
            "; not told apart in cost (busy CPUs' 95% intervals overlap), picked for fewer changes over: {}",
            t.join(", ")
        ));
    }
    let others: Vec<String> = ranked
        .iter()
        .filter(|m| {
            m.config.name != pick.config.name
                && !tied.iter().any(|t| t.config.name == m.config.name)
                && m.cost.is_some()
        })
        .map(|m| format!("{} at {}", m.config.name, cpus(m)))
        .collect();
    // The three cheapest by name; the rest counted, so a reader does not take them for
    // configurations that missed (the table holds them all).
    if let Some(first) = others.get(..others.len().min(3)).filter(|o| !o.is_empty()) {
        a.push_str(&format!("; also meeting it: {}", first.join(", ")));
        if others.len() > first.len() {
            a.push_str(&format!(
                " and {} costlier (the table)",
                others.len() - first.len()
            ));
        }
    }
    a.push_str(&uncosted_words(&uncosted));
    a.push_str(".\n");
    if let Some(t) = all.iter().find(|m| {
        m.config
            .parts
            .iter()
            .any(|p| p.family == search::TUNED_FAMILY)
    }) {
        let verdict = match (t.meets(&s.goals), &t.cost, &pick.cost) {
            (_, _, _) if t.config.name == pick.config.name => "is the pick".to_string(),
            (true, Some(c), Some(p)) if virtperf_report::decide::overlap(c, p) => format!(
                "meets it too, at {:.2} busy CPUs: not told apart from the pick's cost (their 95% intervals overlap)",
                c.mean
            ),
            (true, Some(c), Some(p)) => format!(
                "meets it too, at {:.2} busy CPUs [{:.2}, {:.2}]: the pick saves {:.2} (its own {:.2} [{:.2}, {:.2}])",
                c.mean, c.ci_low, c.ci_high, c.mean - p.mean, p.mean, p.ci_low, p.ci_high
            ),
            (true, _, _) => "meets it too (its CPU was not measured)".into(),
            (false, _, _) => "does not meet it".into(),
        };
        a.push_str(&format!(
            "Against {}: {} {verdict}.\n",
            s.against.as_deref().unwrap_or("tuned"),
            t.config.name
        ));
    }
    a
}

/// The pick is the cheapest of the configurations whose cost was measured; those meeting
/// the goals without one are named, with what that leaves undecided (explain's verdict
/// calls no remedy the cheapest in that case either).
fn uncosted_words(uncosted: &[&Measured]) -> String {
    if uncosted.is_empty() {
        return String::new();
    }
    let names: Vec<&str> = uncosted.iter().map(|m| m.config.name.as_str()).collect();
    format!(
        "; {} also {} it, but {} busy CPUs were not measured: the pick is the cheapest of those measured, whether {} less is undecided",
        names.join(", "),
        if names.len() == 1 { "meets" } else { "meet" },
        if names.len() == 1 { "its" } else { "their" },
        if names.len() == 1 { "it costs" } else { "one costs" },
    )
}

/// "undecided: …": no configuration measured meets the goals or may, but a signal stopped
/// the search before `cut` were tried.
pub(crate) fn cut_short(s: &Search, cut: &[&Measured]) -> String {
    let goals: Vec<String> = s.goals.iter().map(|g| g.words()).collect();
    let names: Vec<&str> = cut.iter().map(|m| m.config.name.as_str()).collect();
    format!(
        "undecided: no configuration measured meets {}, but a signal stopped the search before {} {} tried ({}): whether {} would is not known",
        goals.join(" and "),
        names.len(),
        if names.len() == 1 { "was" } else { "were" },
        names.join(", "),
        if names.len() == 1 { "it" } else { "one of them" }
    )
}

/// Beside an answer made without them: the configurations a signal stopped the search
/// before trying, and what that leaves open (empty when none, or when the answer is
/// already about them).
pub(crate) fn cut_line(s: &Search, all: &[Measured]) -> String {
    let cut: Vec<&str> = all
        .iter()
        .filter(|m| m.cut)
        .map(|m| m.config.name.as_str())
        .collect();
    let comparable = s.comparable();
    let decided = search::pick(&comparable, &s.goals, s.max_cpu);
    if cut.is_empty() || matches!(decided, Pick::Cut { .. }) {
        return String::new();
    }
    format!(
        "Not tried: {} — a signal stopped the search first; the answer is among those measured, and whether {} meets the goals, or for less, is not known.\n",
        cut.join(", "),
        if cut.len() == 1 { "it" } else { "one of them" }
    )
}

/// Configurations meet the goals, but none has a measured cost: no cheapest.
pub(crate) fn no_cost(goals: &str, meeting: &[&Measured]) -> String {
    let names: Vec<&str> = meeting.iter().map(|m| m.config.name.as_str()).collect();
    format!(
        "{} meet {goals}, but none is picked: their busy CPUs were not measured (no cpuidle or CPU split on a machine they keep busy), so none can be called the cheapest",
        names.join(", ")
    )
}

/// "no configuration meets …; closest: …": the exit-1 message.
pub(crate) fn no_answer(s: &Search, all: &[Measured]) -> String {
    let goals: Vec<String> = s.goals.iter().map(|g| g.words()).collect();
    let cap = s
        .max_cpu
        .map_or_else(String::new, |c| format!(" within {c} busy CPUs"));
    if all.iter().all(|m| m.figures.len() != s.goals.len()) {
        return format!(
            "no configuration was measured: {}",
            all.iter()
                .find_map(|m| m.error.clone())
                .unwrap_or_else(|| "every trial failed".into())
        );
    }
    let closest = search::misses(all, &s.goals, s.max_cpu)
        .into_iter()
        .find(|m| m.figures.len() == s.goals.len())
        .map(|m| {
            let figs: Vec<String> = (0..s.goals.len()).map(|i| figure(m, i)).collect();
            format!(
                "; closest: {} at {} ({})",
                m.config.name,
                figs.join(", "),
                cpus_words(m)
            )
        })
        .unwrap_or_default();
    format!(
        "no configuration meets {}{cap}{closest}",
        goals.join(" and ")
    )
}

/// "undecided: no configuration is shown to meet …, but N meet it on average": the exit-5
/// message where such intervals straddle a bound (or rest on one try) and none is shown
/// to meet it.
pub(crate) fn undecided(s: &Search, unsure: &[&Measured]) -> String {
    let goals: Vec<String> = s.goals.iter().map(|g| g.words()).collect();
    let cap = s
        .max_cpu
        .map_or_else(String::new, |c| format!(" within {c} busy CPUs"));
    // The nearest three by name, the rest counted (as the others that meet a goal are).
    let mut named: Vec<String> = unsure
        .iter()
        .take(3)
        .map(|m| {
            let figs: Vec<String> = (0..s.goals.len()).map(|i| figure(m, i)).collect();
            format!("{} at {}", m.config.name, figs.join(", "))
        })
        .collect();
    if unsure.len() > 3 {
        named.push(format!("{} more", unsure.len() - 3));
    }
    format!(
        "undecided: no configuration is shown to meet {}{cap}, but {} on average, {} straddling the bound or resting on one try: {}; more tries (--runs) may tell",
        goals.join(" and "),
        match unsure.len() {
            1 => "1 meets it".to_string(),
            n => format!("{n} meet it"),
        },
        if unsure.len() == 1 { "its interval" } else { "their intervals" },
        named.join("; ")
    )
}
