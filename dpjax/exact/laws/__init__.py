"""The exact tier's integer laws, one module each (:mod:`dpjax.exact.sampler`: the sampler types they implement):
:mod:`~dpjax.exact.laws.discrete_laplace`, :mod:`~dpjax.exact.laws.discrete_gaussian`,
:mod:`~dpjax.exact.laws.boosted` and :mod:`~dpjax.exact.laws.randomized_response`."""
