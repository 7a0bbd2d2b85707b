//! What model calls cost: a price table per model and exact money arithmetic.
//!
//! Money is kept in whole micro-dollars ([`MicroUsd`]), never in floating point: a step's
//! cost is computed once, exactly, from its token counts and integer prices, rounded to
//! the micro-dollar, and a task's cost is the sum of its steps' recorded costs, so it
//! equals what the log shows and does not drift.
//!
//! A model with no price has an *unknown* cost, never zero: [`PriceTable::price`] returns
//! `None`, a step records no cost, and the task's [`CostTotals`] count it as unpriced. So
//! does a call whose provider reported no usage ([`call_cost`]): a replayed session
//! recorded without token counts cost something, but not what zero tokens would say.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::model::Usage;

/// An amount of US dollars in millionths (`1_000_000` is one dollar).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct MicroUsd(pub u64);

impl MicroUsd {
    /// Zero dollars.
    pub const ZERO: MicroUsd = MicroUsd(0);

    /// A dollar amount as written by people (`2.5`, `0.075`), rounded to the micro-dollar.
    /// `None` for a negative, non-finite or absurdly large amount.
    pub fn from_dollars(dollars: f64) -> Option<MicroUsd> {
        // 1e12 dollars is far above any price or cap and keeps the product exact in f64.
        if !dollars.is_finite() || !(0.0..=1e12).contains(&dollars) {
            return None;
        }
        Some(MicroUsd((dollars * 1e6).round() as u64))
    }

    /// The amount in dollars, for JSON readers (display uses [`fmt::Display`]).
    pub fn as_dollars(self) -> f64 {
        self.0 as f64 / 1e6
    }

    /// The sum, saturating (a sum of real costs never comes near `u64::MAX`).
    pub fn saturating_add(self, other: MicroUsd) -> MicroUsd {
        MicroUsd(self.0.saturating_add(other.0))
    }
}

impl fmt::Display for MicroUsd {
    /// `$1.50`, `$0.003`, `$0.000123`: every significant micro-dollar, at least cents.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let whole = self.0 / 1_000_000;
        let frac = format!("{:06}", self.0 % 1_000_000);
        let trimmed = frac.trim_end_matches('0');
        let shown = if trimmed.len() < 2 {
            &frac[..2]
        } else {
            trimmed
        };
        write!(f, "${whole}.{shown}")
    }
}

/// The price of one model, in micro-dollars per million tokens (so `$3 / MTok` is
/// `3_000_000`): integers, so a step's cost is exact.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelPrice {
    /// Input (prompt) tokens not read from the provider's prompt cache.
    pub input_per_mtok: MicroUsd,
    /// Output (completion) tokens, reasoning tokens included.
    pub output_per_mtok: MicroUsd,
    /// Input tokens read from the prompt cache; `None`: billed as input.
    pub cached_input_per_mtok: Option<MicroUsd>,
}

impl ModelPrice {
    /// A price from micro-dollars per million tokens.
    pub const fn new(input: MicroUsd, output: MicroUsd, cached: Option<MicroUsd>) -> ModelPrice {
        ModelPrice {
            input_per_mtok: input,
            output_per_mtok: output,
            cached_input_per_mtok: cached,
        }
    }

    /// What one call with this usage costs, rounded half up to the micro-dollar.
    pub fn cost(&self, usage: &Usage) -> MicroUsd {
        // Tokens x micro-dollars per million tokens = millionths of a micro-dollar: exact
        // in u128; one rounding at the end.
        let cached = usage.cached_input_tokens.min(usage.input_tokens);
        let uncached = usage.input_tokens - cached;
        let cached_price = self.cached_input_per_mtok.unwrap_or(self.input_per_mtok);
        let pico = uncached as u128 * self.input_per_mtok.0 as u128
            + cached as u128 * cached_price.0 as u128
            + usage.output_tokens as u128 * self.output_per_mtok.0 as u128;
        let micro = (pico + 500_000) / 1_000_000;
        MicroUsd(u64::try_from(micro).unwrap_or(u64::MAX))
    }
}

/// What one model call cost: `None` (unknown, never zero) when the model has no price or
/// the call's usage was not reported. Every real call sends a prompt, so a usage of zero
/// input tokens is a missing count (a replayed session recorded without usage, a provider
/// that left it out), not a free call.
pub fn call_cost(price: Option<&ModelPrice>, usage: &Usage) -> Option<MicroUsd> {
    if usage.input_tokens == 0 {
        return None;
    }
    price.map(|p| p.cost(usage))
}

/// The date the shipped prices were taken ([`DEFAULT_PRICES`]).
pub const DEFAULT_PRICES_DATE: &str = "2026-11-26";

const fn usd(micros: u64) -> MicroUsd {
    MicroUsd(micros)
}

/// The shipped defaults: list prices in US dollars per million tokens of the providers'
/// standard tier (no batch discount, prompts up to 200K tokens), taken on
/// [`DEFAULT_PRICES_DATE`] from Anthropic's and OpenAI's published price lists. They are
/// defaults: prices change, and `[pricing."<model>"]` in `agentforge.toml` overrides any
/// of them. Keys are model ids without a dated snapshot suffix (see [`PriceTable::price`]).
pub const DEFAULT_PRICES: &[(&str, ModelPrice)] = &[
    // Anthropic: input, output, cache hits (cache writes are billed as input here:
    // AgentForge asks for no prompt caching, so Anthropic writes none).
    (
        "claude-opus-4-6",
        ModelPrice::new(usd(5_000_000), usd(25_000_000), Some(usd(500_000))),
    ),
    (
        "claude-opus-4-5",
        ModelPrice::new(usd(5_000_000), usd(25_000_000), Some(usd(500_000))),
    ),
    (
        "claude-opus-4-1",
        ModelPrice::new(usd(15_000_000), usd(75_000_000), Some(usd(1_500_000))),
    ),
    (
        "claude-opus-4-0",
        ModelPrice::new(usd(15_000_000), usd(75_000_000), Some(usd(1_500_000))),
    ),
    (
        "claude-opus-4",
        ModelPrice::new(usd(15_000_000), usd(75_000_000), Some(usd(1_500_000))),
    ),
    (
        "claude-sonnet-4-6",
        ModelPrice::new(usd(3_000_000), usd(15_000_000), Some(usd(300_000))),
    ),
    (
        "claude-sonnet-4-5",
        ModelPrice::new(usd(3_000_000), usd(15_000_000), Some(usd(300_000))),
    ),
    (
        "claude-sonnet-4-0",
        ModelPrice::new(usd(3_000_000), usd(15_000_000), Some(usd(300_000))),
    ),
    (
        "claude-sonnet-4",
        ModelPrice::new(usd(3_000_000), usd(15_000_000), Some(usd(300_000))),
    ),
    (
        "claude-3-7-sonnet",
        ModelPrice::new(usd(3_000_000), usd(15_000_000), Some(usd(300_000))),
    ),
    (
        "claude-haiku-4-5",
        ModelPrice::new(usd(1_000_000), usd(5_000_000), Some(usd(100_000))),
    ),
    (
        "claude-3-5-haiku",
        ModelPrice::new(usd(800_000), usd(4_000_000), Some(usd(80_000))),
    ),
    (
        "claude-3-haiku",
        ModelPrice::new(usd(250_000), usd(1_250_000), Some(usd(30_000))),
    ),
    // OpenAI: input, output, cached input.
    (
        "gpt-5.2",
        ModelPrice::new(usd(1_750_000), usd(14_000_000), Some(usd(175_000))),
    ),
    (
        "gpt-5.1",
        ModelPrice::new(usd(1_250_000), usd(10_000_000), Some(usd(125_000))),
    ),
    (
        "gpt-5",
        ModelPrice::new(usd(1_250_000), usd(10_000_000), Some(usd(125_000))),
    ),
    (
        "gpt-5-mini",
        ModelPrice::new(usd(250_000), usd(2_000_000), Some(usd(25_000))),
    ),
    (
        "gpt-5-nano",
        ModelPrice::new(usd(50_000), usd(400_000), Some(usd(5_000))),
    ),
    (
        "gpt-4.1",
        ModelPrice::new(usd(2_000_000), usd(8_000_000), Some(usd(500_000))),
    ),
    (
        "gpt-4.1-mini",
        ModelPrice::new(usd(400_000), usd(1_600_000), Some(usd(100_000))),
    ),
    (
        "gpt-4.1-nano",
        ModelPrice::new(usd(100_000), usd(400_000), Some(usd(25_000))),
    ),
    (
        "gpt-4o",
        ModelPrice::new(usd(2_500_000), usd(10_000_000), Some(usd(1_250_000))),
    ),
    (
        "gpt-4o-mini",
        ModelPrice::new(usd(150_000), usd(600_000), Some(usd(75_000))),
    ),
    (
        "o3",
        ModelPrice::new(usd(2_000_000), usd(8_000_000), Some(usd(500_000))),
    ),
    (
        "o4-mini",
        ModelPrice::new(usd(1_100_000), usd(4_400_000), Some(usd(275_000))),
    ),
];

/// Prices by model: the shipped defaults with the project's entries over them.
#[derive(Debug, Clone, PartialEq)]
pub struct PriceTable {
    prices: BTreeMap<String, ModelPrice>,
    overridden: std::collections::BTreeSet<String>,
}

impl Default for PriceTable {
    fn default() -> Self {
        PriceTable::with_overrides(BTreeMap::new())
    }
}

impl PriceTable {
    /// The defaults, with `overrides` (the config's `[pricing]`) replacing or adding
    /// entries by key.
    pub fn with_overrides(overrides: BTreeMap<String, ModelPrice>) -> PriceTable {
        let mut prices: BTreeMap<String, ModelPrice> = DEFAULT_PRICES
            .iter()
            .map(|(k, p)| (k.to_string(), *p))
            .collect();
        let overridden = overrides.keys().cloned().collect();
        prices.extend(overrides);
        PriceTable { prices, overridden }
    }

    /// The price of `model` and the key it was found under: the model's own key, else
    /// the key without a dated snapshot suffix (`-20250929`, `-2024-08-06`) or `-latest`,
    /// so `claude-sonnet-4-5-20250929` is priced as `claude-sonnet-4-5`.
    pub fn price(&self, model: &str) -> Option<(&str, &ModelPrice)> {
        std::iter::once(model)
            .chain(base_model(model))
            .find_map(|k| self.prices.get_key_value(k))
            .map(|(k, p)| (k.as_str(), p))
    }

    /// Whether `key` comes from the project's `[pricing]` rather than the defaults.
    pub fn is_overridden(&self, key: &str) -> bool {
        self.overridden.contains(key)
    }

    /// What one call to `model` with `usage` cost; `None` when the model has no price or
    /// the usage was not reported ([`call_cost`]).
    pub fn cost(&self, model: &str, usage: &Usage) -> Option<MicroUsd> {
        call_cost(self.price(model).map(|(_, p)| p), usage)
    }
}

/// `model` without its snapshot suffix, if it has one.
fn base_model(model: &str) -> Option<&str> {
    if let Some(base) = model.strip_suffix("-latest") {
        return Some(base);
    }
    let is_digits = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_digit());
    // `-YYYYMMDD` (Anthropic).
    if let Some((base, date)) = model.rsplit_once('-') {
        if is_digits(date, 8) {
            return Some(base);
        }
    }
    // `-YYYY-MM-DD` (OpenAI).
    let mut parts = model.rsplitn(4, '-');
    let (d, m, y, base) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    (is_digits(y, 4) && is_digits(m, 2) && is_digits(d, 2)).then_some(base)
}

/// What a task's steps cost so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CostTotals {
    /// The sum of the priced steps' costs.
    pub usd_micros: MicroUsd,
    /// Steps whose cost is unknown (their model had no price, or they were recorded
    /// before costs were): while any, the task's cost is unknown and `usd_micros` is
    /// only a lower bound.
    #[serde(default)]
    pub unpriced_steps: u64,
}

impl CostTotals {
    /// Adds one step's cost (`None`: unknown).
    pub fn add(&mut self, step: Option<MicroUsd>) {
        match step {
            Some(c) => self.usd_micros = self.usd_micros.saturating_add(c),
            None => self.unpriced_steps += 1,
        }
    }

    /// Adds another task's totals (a sprint's role tasks).
    pub fn merge(&mut self, other: &CostTotals) {
        self.usd_micros = self.usd_micros.saturating_add(other.usd_micros);
        self.unpriced_steps += other.unpriced_steps;
    }

    /// The total, when every step's cost is known.
    pub fn known(&self) -> Option<MicroUsd> {
        (self.unpriced_steps == 0).then_some(self.usd_micros)
    }
}

impl fmt::Display for CostTotals {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.known(), self.usd_micros) {
            (Some(c), _) => write!(f, "{c}"),
            (None, MicroUsd::ZERO) => write!(f, "unknown ({})", unpriced(self.unpriced_steps)),
            (None, c) => write!(
                f,
                "unknown (at least {c}; {})",
                unpriced(self.unpriced_steps)
            ),
        }
    }
}

fn unpriced(n: u64) -> String {
    format!("{n} unpriced step{}", if n == 1 { "" } else { "s" })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(input: u64, cached: u64, output: u64) -> Usage {
        Usage {
            input_tokens: input,
            output_tokens: output,
            cached_input_tokens: cached,
        }
    }

    #[test]
    fn display_keeps_every_micro_dollar_and_at_least_cents() {
        let shown: Vec<String> = [0, 1, 120, 1_500_000, 1_234_567, 30_000, 10_000_000]
            .iter()
            .map(|&m| MicroUsd(m).to_string())
            .collect();
        assert_eq!(
            shown,
            [
                "$0.00",
                "$0.000001",
                "$0.00012",
                "$1.50",
                "$1.234567",
                "$0.03",
                "$10.00"
            ]
        );
    }

    #[test]
    fn dollars_parse_exactly_and_refuse_nonsense() {
        assert_eq!(MicroUsd::from_dollars(0.075), Some(MicroUsd(75_000)));
        assert_eq!(MicroUsd::from_dollars(0.1 + 0.2), Some(MicroUsd(300_000)));
        assert_eq!(MicroUsd::from_dollars(3.0), Some(MicroUsd(3_000_000)));
        assert_eq!(MicroUsd::from_dollars(-1.0), None);
        assert_eq!(MicroUsd::from_dollars(f64::NAN), None);
        assert_eq!(MicroUsd::from_dollars(f64::INFINITY), None);
    }

    #[test]
    fn a_call_costs_its_tokens_at_their_prices() {
        let sonnet = PriceTable::default();
        // 12,000 in (2,000 of them cached), 800 out at $3 / $0.30 / $15 per MTok:
        // 10,000 x 3 + 2,000 x 0.3 + 800 x 15 = 30,000 + 600 + 12,000 micro-dollars.
        let c = sonnet
            .cost("claude-sonnet-4-5", &usage(12_000, 2_000, 800))
            .unwrap();
        assert_eq!(c, MicroUsd(42_600));
        assert_eq!(c.to_string(), "$0.0426");
        // Without a cached price, cached tokens cost as input.
        let p = ModelPrice::new(usd(3_000_000), usd(15_000_000), None);
        assert_eq!(p.cost(&usage(12_000, 2_000, 800)), MicroUsd(48_000));
        // More cached than input (a confused provider) never underflows: the input is
        // priced once, as cached.
        let sonnet = *PriceTable::default().price("claude-sonnet-4-5").unwrap().1;
        assert_eq!(sonnet.cost(&usage(10, 50, 0)), MicroUsd(3));
    }

    #[test]
    fn a_call_without_reported_usage_costs_unknown_not_zero() {
        let t = PriceTable::default();
        assert_eq!(t.cost("claude-sonnet-4-5", &usage(0, 0, 0)), None);
        // Output alone is no report either: every call has a prompt.
        assert_eq!(t.cost("claude-sonnet-4-5", &usage(0, 0, 40)), None);
        assert_eq!(call_cost(None, &usage(100, 0, 10)), None);
        let free = ModelPrice::new(MicroUsd::ZERO, MicroUsd::ZERO, None);
        // A priced free model with real usage is zero, and known.
        assert_eq!(
            call_cost(Some(&free), &usage(100, 0, 10)),
            Some(MicroUsd::ZERO)
        );
        let mut totals = CostTotals::default();
        totals.add(call_cost(Some(&free), &usage(0, 0, 0)));
        assert_eq!(totals.known(), None);
        assert_eq!(totals.to_string(), "unknown (1 unpriced step)");
    }

    #[test]
    fn rounding_is_half_up_per_call_and_sums_do_not_drift() {
        // gpt-5-nano input: $0.05 / MTok = 0.05 micro-dollars a token.
        let t = PriceTable::default();
        assert_eq!(t.cost("gpt-5-nano", &usage(9, 0, 0)), Some(MicroUsd(0)));
        assert_eq!(t.cost("gpt-5-nano", &usage(10, 0, 0)), Some(MicroUsd(1)));
        let mut totals = CostTotals::default();
        for _ in 0..1_000_000 {
            totals.add(Some(MicroUsd(7)));
        }
        assert_eq!(totals.known(), Some(MicroUsd(7_000_000)));
    }

    #[test]
    fn snapshot_suffixes_find_the_base_price_and_overrides_win() {
        let mut over = BTreeMap::new();
        let mine = ModelPrice::new(usd(1), usd(2), None);
        over.insert("claude-sonnet-4-5".to_string(), mine);
        over.insert("local-llama".to_string(), mine);
        let t = PriceTable::with_overrides(over);
        assert_eq!(
            t.price("claude-sonnet-4-5-20250929"),
            Some(("claude-sonnet-4-5", &mine))
        );
        assert!(t.is_overridden("claude-sonnet-4-5"));
        assert!(!t.is_overridden("gpt-4o"));
        assert_eq!(t.price("gpt-4o-2024-08-06").map(|p| p.0), Some("gpt-4o"));
        assert_eq!(
            t.price("claude-3-5-haiku-latest").map(|p| p.0),
            Some("claude-3-5-haiku")
        );
        assert_eq!(t.price("local-llama").map(|p| p.0), Some("local-llama"));
        assert_eq!(t.price("llama3:8b"), None);
        // A suffix that is not a date is part of the name.
        assert_eq!(t.price("gpt-4o-1234"), None);
        assert_eq!(t.cost("mystery", &usage(1, 0, 1)), None);
    }

    #[test]
    fn an_unpriced_step_makes_the_total_unknown_not_zero() {
        let mut t = CostTotals::default();
        t.add(Some(MicroUsd(1_500)));
        assert_eq!(t.to_string(), "$0.0015");
        t.add(None);
        assert_eq!(t.known(), None);
        assert_eq!(t.to_string(), "unknown (at least $0.0015; 1 unpriced step)");
        let only_unknown = CostTotals {
            usd_micros: MicroUsd::ZERO,
            unpriced_steps: 2,
        };
        assert_eq!(only_unknown.to_string(), "unknown (2 unpriced steps)");
    }

    #[test]
    fn every_default_is_priced_and_reachable() {
        let t = PriceTable::default();
        for (key, price) in DEFAULT_PRICES {
            assert_eq!(t.price(key), Some((*key, price)), "{key}");
            assert!(price.output_per_mtok >= price.input_per_mtok, "{key}");
            if let Some(c) = price.cached_input_per_mtok {
                assert!(c < price.input_per_mtok, "{key}");
            }
        }
    }
}
