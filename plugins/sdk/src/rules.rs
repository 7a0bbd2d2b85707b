//! Regex rule tables: the common shape of an extractor.

use regex::Regex;

use crate::{Category, Fact, Input};

/// Longest capture put into a statement; longer ones are cut with `…` (the host shows
/// facts to a model under a token budget).
const MAX_CAPTURE: usize = 160;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Mode {
    Each,
    Total,
}

/// One regex rule: a pattern, the fact category and a statement template.
///
/// Templates name captures as `{1}`, `{name}`, and the tool as `{tool}`; an unmatched
/// optional group expands to nothing.
#[derive(Debug, Clone)]
pub struct Rule {
    mode: Mode,
    pattern: Regex,
    category: Category,
    template: String,
    limit: Option<usize>,
    unless: Option<Regex>,
    skip_if: Option<(String, Regex)>,
}

fn compile(pattern: &str) -> Regex {
    // A bad pattern is the author's bug: the panic message names it, and the host reports
    // the panic with that message.
    Regex::new(pattern).unwrap_or_else(|e| panic!("bad rule pattern {pattern:?}: {e}"))
}

impl Rule {
    fn new(mode: Mode, pattern: &str, category: Category, template: &str) -> Rule {
        Rule {
            mode,
            pattern: compile(pattern),
            category,
            template: template.to_string(),
            limit: None,
            unless: None,
            skip_if: None,
        }
    }

    /// One fact per match.
    pub fn each(pattern: &str, category: Category, template: &str) -> Rule {
        Rule::new(Mode::Each, pattern, category, template)
    }

    /// One fact for all matches together: captures that are numbers in every match are
    /// summed (e.g. the `test result:` line of each test binary); others keep the last
    /// match's text.
    pub fn total(pattern: &str, category: Category, template: &str) -> Rule {
        Rule::new(Mode::Total, pattern, category, template)
    }

    /// At most `n` facts from this rule (matches skipped by [`Rule::skip_if`] do not count).
    pub fn limit(mut self, n: usize) -> Rule {
        self.limit = Some(n);
        self
    }

    /// The rule does not apply when `pattern` matches anywhere in the output (e.g. no
    /// "test X fails" facts when panics already named the tests and their locations).
    pub fn unless(mut self, pattern: &str) -> Rule {
        self.unless = Some(compile(pattern));
        self
    }

    /// Skips the matches whose capture `group` (a number or a name) matches `pattern`.
    pub fn skip_if(mut self, group: impl ToString, pattern: &str) -> Rule {
        self.skip_if = Some((group.to_string(), compile(pattern)));
        self
    }

    fn apply(&self, input: &Input, out: &mut Vec<Fact>) {
        if self
            .unless
            .as_ref()
            .is_some_and(|u| u.is_match(&input.output))
        {
            return;
        }
        let matches = self.pattern.captures_iter(&input.output).filter(|c| {
            self.skip_if
                .as_ref()
                .is_none_or(|(group, re)| !group_text(c, group).is_some_and(|t| re.is_match(t)))
        });
        match self.mode {
            Mode::Each => {
                for c in matches.take(self.limit.unwrap_or(usize::MAX)) {
                    let values = |g: &str| group_text(&c, g).map(str::to_string);
                    out.push(self.fact(input, values));
                }
            }
            Mode::Total => {
                let n = self.pattern.captures_len();
                let mut sums: Vec<Option<u64>> = vec![Some(0); n];
                let mut last: Vec<String> = vec![String::new(); n];
                let mut seen = false;
                for c in matches {
                    seen = true;
                    for i in 1..n {
                        let text = c.get(i).map_or("", |m| m.as_str());
                        sums[i] = sums[i].and_then(|s| Some(s + text.parse::<u64>().ok()?));
                        last[i] = text.to_string();
                    }
                }
                if seen {
                    let names: Vec<Option<&str>> = self.pattern.capture_names().collect();
                    let values = |g: &str| {
                        let i = g
                            .parse::<usize>()
                            .ok()
                            .or_else(|| names.iter().position(|n| *n == Some(g)))?;
                        Some(match sums.get(i)? {
                            Some(s) => s.to_string(),
                            None => last[i].clone(),
                        })
                    };
                    out.push(self.fact(input, values));
                }
            }
        }
    }

    fn fact(&self, input: &Input, values: impl Fn(&str) -> Option<String>) -> Fact {
        Fact {
            category: self.category,
            statement: expand(&self.template, &input.tool, values),
            confidence: 1.0,
            source: input.tool.clone(),
        }
    }
}

fn group_text<'h>(c: &regex::Captures<'h>, group: &str) -> Option<&'h str> {
    match group.parse::<usize>() {
        Ok(i) => c.get(i),
        Err(_) => c.name(group),
    }
    .map(|m| m.as_str())
}

/// Fills `{tool}`, `{N}` and `{name}` in `template`; an unknown or unmatched group is
/// empty. Captures are trimmed and cut to [`MAX_CAPTURE`] characters.
fn expand(template: &str, tool: &str, values: impl Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(template.len() + 32);
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let Some(close) = after.find('}') else {
            out.push_str(&rest[open..]);
            return out;
        };
        let key = &after[..close];
        if key == "tool" {
            out.push_str(tool);
        } else {
            out.push_str(&cut(values(key).as_deref().unwrap_or("")));
        }
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    out
}

fn cut(s: &str) -> String {
    let s = s.trim();
    if s.chars().count() <= MAX_CAPTURE {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(MAX_CAPTURE).collect::<String>())
    }
}

/// An ordered table of [`Rule`]s; facts come out in rule order.
#[derive(Debug, Clone, Default)]
pub struct RuleSet {
    rules: Vec<Rule>,
}

impl RuleSet {
    /// A rule set from its rules, applied in order.
    pub fn new(rules: Vec<Rule>) -> RuleSet {
        RuleSet { rules }
    }

    /// Facts from every rule, in rule order.
    pub fn extract(&self, input: &Input) -> Vec<Fact> {
        let mut out = Vec::new();
        for r in &self.rules {
            r.apply(input, &mut out);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ActionResult;

    fn input(output: &str) -> Input {
        Input::new("tests", output, ActionResult::Failure, 1)
    }

    #[test]
    fn total_sums_numbers_and_each_limits() {
        let rules = RuleSet::new(vec![
            Rule::total(
                r"(ok|FAILED)\. (?P<p>\d+) passed",
                Category::Verification,
                "{tool}: {p} passed ({1})",
            ),
            Rule::each(r"bad (\w+)", Category::Error, "{1} is bad")
                .limit(1)
                .skip_if(1, "^x$"),
        ]);
        let facts = rules.extract(&input(
            "ok. 2 passed\nFAILED. 3 passed\nbad x\nbad y\nbad z",
        ));
        let s: Vec<_> = facts.iter().map(|f| f.statement.as_str()).collect();
        assert_eq!(s, ["tests: 5 passed (FAILED)", "y is bad"]);
    }

    #[test]
    fn unless_suppresses_a_rule() {
        let rules = RuleSet::new(vec![
            Rule::each(r"bad (\w+)", Category::Error, "{1}").unless("panicked")
        ]);
        assert!(rules.extract(&input("bad a\npanicked")).is_empty());
        assert_eq!(rules.extract(&input("bad a")).len(), 1);
    }
}
