"""A noise kernel written outside the package: logistic noise, released, boosted, accounted and tuned.

The kernel protocol asks for three methods of the noise law and a scale leaf; everything
else (inverse-CDF sampling through the record-addressed stream, the output-grid PLD,
privacy boosting with its exact closed forms, tuning of the scale) comes from the
engine. Run: ``python examples/custom_kernel.py``; the CLI takes the same class:
``dpjax release --mechanism boosted --kernel examples.custom_kernel:Logistic``.
"""

import jax
import jax.numpy as jnp

import accounting
import dpjax
import optimize


@dpjax.pytree_dataclass
class Logistic(dpjax.AdditiveMechanism):
    """Logistic noise: density e^{−|n|/s} / (s (1 + e^{−|n|/s})²), CDF 1/(1 + e^{−n/s}); log-concave,
    pure ε = Δ/s."""

    scale: jax.Array

    def noise_log_prob(self, n):
        z = -jnp.abs(n) / self.scale
        return z - 2.0 * jnp.log1p(jnp.exp(z)) - jnp.log(self.scale)

    def noise_log_cdf(self, n):
        return -jax.nn.softplus(-n / self.scale)  # log of the logistic function, exact in the tail

    def noise_icdf(self, u):
        return self.scale * (jnp.log(u) - jnp.log1p(-u))


def main():
    k1, k2 = jax.random.split(jax.random.key(0))
    counts = jnp.arange(8.0)
    kernel = Logistic(scale=2.0)
    print("released:", dpjax.release(k1, counts, kernel))
    print("epsilon at delta=1e-6 (output-grid PLD):", float(accounting.pld(kernel).get_epsilon_for_delta(1e-6)))

    boosted = dpjax.PrivacyBoosted(kernel, dpjax.AbsoluteError(tau=3.0), rho=0.9)
    print("boosting rate q =", float(boosted.boosting_rate), "coverage =", float(boosted.coverage(0.0)))
    print("boosted release:", dpjax.release(k2, counts, boosted))
    print("boosted epsilon at delta=1e-6 (exact):", float(accounting.exact.epsilon(boosted, 1e-6)))

    best = optimize.tune_boosted(kernel=Logistic(scale=1.0), region=dpjax.AbsoluteError(tau=3.0), rho=0.9, delta=1e-6)
    print(
        f"tuned scale {float(best.sigma):.4f}: epsilon {float(best.epsilon):.4f} "
        f"(plain logistic meeting the same coverage: {float(best.baseline_epsilon):.4f})"
    )


if __name__ == "__main__":
    main()
