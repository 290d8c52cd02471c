//! Random loss models: Bernoulli and the two-state Gilbert–Elliott burst model.

use rand_chacha::ChaCha8Rng;
use rand_core::Rng;
use serde::Deserialize;

/// A uniform draw in `[0, 1)`.
pub fn uniform(rng: &mut ChaCha8Rng) -> f64 {
    (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}

/// True with probability `p`.
pub fn chance(rng: &mut ChaCha8Rng, p: f64) -> bool {
    p > 0.0 && uniform(rng) < p
}

/// How a link loses packets at random.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize, Default)]
#[serde(tag = "model", rename_all = "kebab-case", deny_unknown_fields)]
pub enum LossModel {
    /// No random loss.
    #[default]
    None,
    /// Each packet is lost independently with probability `p`.
    Bernoulli {
        /// Loss probability.
        p: f64,
    },
    /// Gilbert–Elliott: a good and a bad state with their own loss probabilities.
    GilbertElliott {
        /// Probability of moving from good to bad, per packet.
        p_good_bad: f64,
        /// Probability of moving from bad to good, per packet.
        p_bad_good: f64,
        /// Loss probability in the good state.
        #[serde(default)]
        loss_good: f64,
        /// Loss probability in the bad state.
        #[serde(default = "one")]
        loss_bad: f64,
    },
}

fn one() -> f64 {
    1.0
}

impl LossModel {
    /// Checks that every probability lies in `[0, 1]`; names the offending field.
    pub fn check(&self) -> Result<(), String> {
        let probs: &[(&str, f64)] = match self {
            LossModel::None => &[],
            LossModel::Bernoulli { p } => &[("p", *p)],
            LossModel::GilbertElliott {
                p_good_bad,
                p_bad_good,
                loss_good,
                loss_bad,
            } => &[
                ("p_good_bad", *p_good_bad),
                ("p_bad_good", *p_bad_good),
                ("loss_good", *loss_good),
                ("loss_bad", *loss_bad),
            ],
        };
        for (k, v) in probs {
            if !(0.0..=1.0).contains(v) {
                return Err(format!("{k} = {v} is not a probability (0..=1)"));
            }
        }
        Ok(())
    }

    /// Long-run loss rate of the model.
    pub fn mean_loss(&self) -> f64 {
        match *self {
            LossModel::None => 0.0,
            LossModel::Bernoulli { p } => p,
            LossModel::GilbertElliott {
                p_good_bad,
                p_bad_good,
                loss_good,
                loss_bad,
            } => {
                let s = p_good_bad + p_bad_good;
                if s == 0.0 {
                    return loss_good;
                }
                let bad = p_good_bad / s;
                bad * loss_bad + (1.0 - bad) * loss_good
            }
        }
    }
}

/// A loss model with its state (the Gilbert–Elliott state bit).
#[derive(Clone, Debug)]
pub struct LossState {
    model: LossModel,
    bad: bool,
}

impl LossState {
    /// A fresh state (good).
    pub fn new(model: LossModel) -> Self {
        LossState { model, bad: false }
    }

    /// Decides whether the next packet is lost.
    pub fn lose(&mut self, rng: &mut ChaCha8Rng) -> bool {
        match self.model {
            LossModel::None => false,
            LossModel::Bernoulli { p } => chance(rng, p),
            LossModel::GilbertElliott {
                p_good_bad,
                p_bad_good,
                loss_good,
                loss_bad,
            } => {
                let flip = if self.bad { p_bad_good } else { p_good_bad };
                if chance(rng, flip) {
                    self.bad = !self.bad;
                }
                chance(rng, if self.bad { loss_bad } else { loss_good })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_core::SeedableRng;

    #[test]
    fn gilbert_elliott_long_run_rate_matches_model() {
        let m = LossModel::GilbertElliott {
            p_good_bad: 0.01,
            p_bad_good: 0.1,
            loss_good: 0.0,
            loss_bad: 0.5,
        };
        let mut s = LossState::new(m);
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let n = 200_000;
        let lost = (0..n).filter(|_| s.lose(&mut rng)).count() as f64 / n as f64;
        assert!(
            (lost - m.mean_loss()).abs() < 0.01,
            "{lost} vs {}",
            m.mean_loss()
        );
    }

    #[test]
    fn probabilities_out_of_range_are_rejected() {
        assert!(LossModel::Bernoulli { p: 1.5 }.check().is_err());
        assert!(LossModel::Bernoulli { p: 0.5 }.check().is_ok());
    }
}
