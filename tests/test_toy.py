"""Appendix G's statements, checked numerically on the toy model; Fig. 9's D values."""

from __future__ import annotations

import numpy as np
import pytest

from initmem.analysis import toy

D0 = toy.imbalance(toy.A0, toy.B0)  # -35


def test_start_has_the_captions_imbalance():
    assert D0 == -35


def test_gradient_flow_conserves_imbalance_while_it_converges():
    path = toy.gradient_flow([0.0, 1.0, 5.0, 50.0])
    d = toy.imbalance(path[:, 0], path[:, 1])
    assert np.abs(d - D0).max() < 1e-8
    a, b = path[-1]
    assert a * b == pytest.approx(1.0, abs=1e-6)  # converged, so the memory is real
    # Prop. 2: the final norm is fixed by D0 and the product
    assert a * a + b * b == pytest.approx(np.sqrt(D0**2 + 4), rel=1e-7)


def test_small_step_gd_approaches_the_flow_conservation():
    """eta -> 0: GD's total leakage over the same flow time vanishes like eta."""
    leaks = [abs(toy.imbalance(*toy.trajectory("gd", eta, int(0.5 / eta))[-1]) - D0)
             for eta in (1e-3, 1e-4)]
    assert leaks[1] < leaks[0] / 5
    assert leaks[1] < 0.01


@pytest.mark.parametrize("l2", [0.05, 0.3])
def test_l2_decay_contracts_imbalance_as_exp_minus_2_lambda_t(l2):
    t = np.array([0.0, 0.5, 2.0, 6.0])
    path = toy.gradient_flow(t, l2=l2)
    d = toy.imbalance(path[:, 0], path[:, 1])
    np.testing.assert_allclose(d, D0 * np.exp(-2 * l2 * t), rtol=1e-8)


def test_one_gd_step_moves_imbalance_by_exactly_the_second_order_term():
    a, b, eta, y = 0.7, -1.3, 0.05, 2.0
    (a1, b1) = toy.trajectory("gd", eta, 1, (y,), a0=a, b0=b)[-1]
    g = 2 * (a * b - y)
    assert toy.imbalance(a1, b1) - toy.imbalance(a, b) == pytest.approx(
        eta**2 * g**2 * (b * b - a * a), rel=1e-12)


def _one_step_leak(rule: str, etas: np.ndarray) -> np.ndarray:
    return np.array([abs(toy.imbalance(*toy.trajectory(rule, eta, 1)[-1]) - D0)
                     for eta in etas])


def test_gd_leakage_per_step_scales_as_eta_squared():
    etas = np.geomspace(1e-5, 1e-3, 7)
    slope = np.polyfit(np.log(etas), np.log(_one_step_leak("gd", etas)), 1)[0]
    assert slope == pytest.approx(2.0, abs=0.01)


def test_adam_moves_imbalance_at_first_order():
    """Prop. 8 / the scalar example: a preconditioner breaks the first-order cancellation."""
    etas = np.geomspace(1e-5, 1e-3, 7)
    slope = np.polyfit(np.log(etas), np.log(_one_step_leak("adam", etas)), 1)[0]
    assert slope == pytest.approx(1.0, abs=0.01)


def _deep_net(seed: int = 0) -> tuple[list[np.ndarray], np.ndarray]:
    rng = np.random.default_rng(seed)
    dims = [4, 3, 5, 2]  # W1: 3x4, W2: 5x3, W3: 2x5
    weights = [rng.normal(size=(o, i)) * 0.7 for i, o in zip(dims[:-1], dims[1:], strict=True)]
    return weights, rng.normal(size=(dims[-1], dims[0]))


def test_deep_linear_gradients_match_finite_differences():
    weights, target = _deep_net()

    def loss(ws):
        f = ws[2] @ ws[1] @ ws[0]
        return 0.5 * np.sum((f - target) ** 2)

    grads = toy.deep_linear_grads(weights, target)
    for j in range(len(weights)):
        bumped = [x.copy() for x in weights]
        bumped[j][1, 0] += 1e-6
        assert grads[j][1, 0] == pytest.approx((loss(bumped) - loss(weights)) / 1e-6, rel=1e-4)


def test_deep_linear_flow_conserves_adjacent_imbalances():
    weights, target = _deep_net()
    after = toy.deep_linear_flow(weights, target, t_end=3.0)
    assert np.linalg.norm(after[0] - weights[0]) > 0.1  # the weights did move
    for d0, d1 in zip(toy.adjacent_imbalances(weights), toy.adjacent_imbalances(after),
                      strict=True):
        np.testing.assert_allclose(d1, d0, atol=1e-8)


def test_deep_linear_flow_with_decay_contracts_imbalances():
    weights, target = _deep_net(1)
    l2, t_end = 0.2, 2.0
    after = toy.deep_linear_flow(weights, target, t_end=t_end, l2=l2)
    for d0, d1 in zip(toy.adjacent_imbalances(weights), toy.adjacent_imbalances(after),
                      strict=True):
        np.testing.assert_allclose(d1, d0 * np.exp(-2 * l2 * t_end), atol=1e-8)


def test_deep_linear_finite_step_leakage_is_exactly_second_order():
    """Prop. 7: D_j(k+1) - D_j(k) = eta^2 (H_j H_j^T - H_{j+1}^T H_{j+1})."""
    weights, target = _deep_net(2)
    eta = 0.01
    grads = toy.deep_linear_grads(weights, target)
    stepped = [w - eta * h for w, h in zip(weights, grads, strict=True)]
    before, after = toy.adjacent_imbalances(weights), toy.adjacent_imbalances(stepped)
    for j in range(len(before)):
        expected = eta**2 * (grads[j] @ grads[j].T - grads[j + 1].T @ grads[j + 1])
        np.testing.assert_allclose(after[j] - before[j], expected, atol=1e-12)


@pytest.fixture(scope="module")
def fig9_table():
    from initmem.analysis.figures.toyfig import simulate

    return toy.toy_table(simulate()).set_index(["optimizer", "eta"])["D_final"]


def test_fig9_gd_small_step_keeps_imbalance_large_step_loses_it(fig9_table):
    assert fig9_table["gd", 0.01] == pytest.approx(-35, abs=1)  # measured -34.6
    assert fig9_table["gd", 0.04] == pytest.approx(-3, abs=0.5)  # measured -3.07


def test_fig9_sgd_with_cyclic_targets_forgets(fig9_table):
    assert abs(fig9_table["sgd", 0.01]) < 1e-3 and abs(fig9_table["sgd", 0.04]) < 1e-3


def test_fig9_full_batch_adam_moves_imbalance_then_freezes(fig9_table):
    # measured -28.9 (eta 0.01) and -26.6 (eta 0.04): the caption's "~ -27"
    for eta in toy.ETAS:
        assert -30 < fig9_table["adam", eta] < -25
    path = toy.trajectory("adam", 0.04, 5_000)
    d = toy.imbalance(path[:, 0], path[:, 1])
    assert abs(d[-1] - d[-1001]) < 1e-3 * abs(d[-1] - d[0])  # frozen: stalled at ab = 1
    assert path[-1, 0] * path[-1, 1] == pytest.approx(1.0, abs=1e-3)


def test_fig9_minibatch_adam_forgets_faster_than_full_batch(fig9_table):
    # The caption: with stochastic minibatches both rates reach D ~ 0.
    assert abs(fig9_table["minibatch_adam", 0.04]) < 1e-2
    assert abs(fig9_table["minibatch_adam", 0.01]) < 1e-2
