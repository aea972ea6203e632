"""One allocation of the crawl's budget rate over its known pages: pure numpy, no Scrapy, no Redis.

Input: every known page's record (:data:`webcrawl.state.records.DTYPE`) and host, the hosts'
delays, holds and sitemap trust, the budget rate and the site's shares. Output: each page's
revisit interval (its record's ``iv``; due = last fetch + interval) and what the allocation
expects to spend on what. The split, per second of budget ``R``:

- discovery: while new URLs wait, at least the site's ``reserve.discovery`` share, up to 80% while
  the backlog is large (a page never fetched is all stale: finding it buys more than any
  revisit); the scheduler spends it, here it is only held back;
- detectors: sitemaps every ``sitemap_seconds`` (a quarter of that on hosts whose ``lastmod``
  earned trust), then listing pages, seeds and hubs (pages without a page type that link typed
  pages), sharing ``reserve.detectors`` in proportion to the square root of each one's estimated
  change rate over its cost (what minimises the time a change waits to be seen, for a given
  spend), each read at least once a cycle (a page born there is found within about a cycle);
- pages removed (confirmed 404/410) or moved (their history went to their new URL) are not
  planned: the crawl state probes removed ones on its own schedule;
- verification: a uniform random sample of known pages made due now, ``reserve.verification``;
- re-estimation: a floor rate on every known page, ``reserve.reestimation``;
- pages of hosts whose sitemap dates are trusted are not polled beyond the floor: a newer date
  makes them due at once;
- known changes (a trusted date, a listing's summary) make a page due at once only where that
  is worth its cost (``follow``: never for pages that change too fast to keep fresh), and what
  following them is expected to cost is held back;
- the rest, times the controller's gain ``g``: water-filling over the other pages with the
  estimated change rates, values and costs, under each host's capacity (one visit per delay, less what
  detectors and discovery take there, less any backoff hold) (:func:`webcrawl.revisit.allocate`).

``g`` corrects what the allocation cannot know (overheads, fetches that cost more than expected,
triggers): the allocator raises it while budget goes unused and lowers it slowly otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from webcrawl.revisit import (
    GammaPrior, Objective, effective_data, estimate_rates, fit_group_priors,
)
from webcrawl.revisit.allocate import allocate_rates, expected_freshness, frequencies
from webcrawl.state.records import KIND_HUB, KIND_SITEMAP, REMOVED, history_table

__all__ = ["AllocInput", "AllocResult", "TIER_VALUES", "plan"]

#: Value of a page by tier (site files: 1 low .. 4 critical): about 3x a step.
TIER_VALUES = np.array([1.0, 1.0, 3.0, 10.0, 30.0])  # index 0: no tier
#: Share of a host's turns (one per delay) the plan may fill: all of them. A host whose delay binds
#: is the crawl's scarcest resource; turns the plan leaves unused go to early revisits anyway.
UTILISATION = 1.0
#: While new URLs wait, discovery takes up to this share of the budget, enough to fetch the
#: backlog in about DISCOVERY_SECONDS (half a cycle when cycles are shorter).
DISCOVERY_MAX = 0.8
DISCOVERY_SECONDS = 30.0
#: Listing pages, hubs and seeds are read at least once in this many cycles (new pages appear there).
DETECTOR_MAX_CYCLES = 1
#: Share of a page's changes a listing's summary shows (price, stock: not every field).
LISTED_SHARE = 0.5
LAG_SAMPLES = 5  #: followed changes a host's measured detection lag needs
_CHUNK = 50_000
Floats = NDArray[np.float64]


@dataclass
class AllocInput:
    rows: np.ndarray  #: records.DTYPE, one per known page
    host: NDArray[np.intp]  #: host index per row
    delay: Floats  #: per host, seconds
    hold_until: Floats  #: per host, server time before which the host is held back
    health: Floats  #: per host, cost multiplier >= 1
    sitemap_trusted: NDArray[np.bool_]  #: per host
    seed: NDArray[np.bool_]  #: per row: a seed URL
    now: float
    budget_rate: float  #: cost per second
    period: float  #: seconds until the next allocation
    cycle_seconds: float
    sitemap_seconds: float
    shares: dict[str, float]  #: discovery, reestimation, verification, detectors
    type_tier: dict[int, int]  #: page type id -> tier 1..4
    listing_types: frozenset[int]
    prior: GammaPrior
    default_cost: float
    backlog: float  #: new URLs waiting
    gain: float = 1.0
    objective: Objective = Objective.FRESHNESS
    seed_rng: int | None = None
    #: per row: since when listings show the page's summary, when they last listed it (or None)
    listed: Floats | None = None


@dataclass
class AllocResult:
    interval: Floats  #: per row, seconds (inf: not scheduled)
    verify: NDArray[np.intp]  #: rows to make due now
    rate: Floats  #: estimated change rate per row
    value: Floats
    cost: Floats
    follow: NDArray[np.bool_]  #: per row: a known change makes the page due at once
    figures: dict[str, float] = field(default_factory=dict)


def estimate(rows: np.ndarray, prior: GammaPrior) -> Floats:
    """Posterior mean change rates, each page type's prior fitted over its pages."""
    return posterior(rows, prior)[0]


@dataclass
class Readings:
    """Evidence about pages besides their fetches, per row (0 where none): a span seen without a
    change (``quiet`` seconds) and a span that ended in a change (``changed`` seconds)."""

    quiet: Floats
    changed: Floats


def listing_readings(rows: np.ndarray, listed: Floats, share: float) -> Readings:
    """What listings said of each page since its last fetch, as evidence about its change rate.

    ``listed``: per row, since when listings have shown the page's current summary and when they
    last listed it. A listing sees only a share ``s`` of a page's changes (its summary's fields),
    so its readings are those of a Poisson process of rate ``s * rate``: no visible change over
    ``T`` seconds is the evidence of ``s T`` quiet seconds for the page's own rate, and a visible
    change within ``T`` that of a change within ``s T``. Only the span since the last fetch counts
    (the fetches cover what came before)."""
    n = len(rows)
    quiet, changed = np.zeros(n), np.zeros(n)
    if n == 0 or listed is None or not len(listed):
        return Readings(quiet, changed)
    fetched = rows["last_fetched"]
    since, last = listed[:, 0], listed[:, 1]
    seen = (fetched > 0) & (last > fetched)
    start = np.maximum(since, fetched)
    # Quiet since the summary last changed (or since the fetch, if later); a change seen after
    # the fetch ended the span before it.
    quiet = np.where(seen, np.maximum(last - start, 0.0) * share, 0.0)
    changed = np.where(seen & (since > fetched), (since - fetched) * share, 0.0)
    return Readings(quiet, changed)


def posterior(rows: np.ndarray, prior: GammaPrior,
              readings: Readings | None = None) -> tuple[Floats, Floats, Floats]:
    """Each page's posterior mean change rate, and the Gamma posterior's shape and rate
    (its prior's plus its own evidence, as effective data) for what depends on more than the
    mean (the chance a copy is still fresh). ``readings``: evidence from other than fetches,
    added to each page's history as one more observation."""
    group = rows["type"].astype(np.intp)
    n = len(rows)
    ngroups = int(group.max()) + 1 if n else 1
    rates = np.empty(n)
    datas = []
    tables = []
    for start in range(0, n, _CHUNK):
        table = history_table(rows[start:start + _CHUNK])
        if readings is not None:
            _add_readings(table, readings, start)
        tables.append(table)
        datas.append(effective_data(table))
    if not datas:
        return rates, np.empty(0), np.empty(0)
    events = np.concatenate([d.events for d in datas])
    exposure = np.concatenate([d.exposure for d in datas])
    mle = np.concatenate([d.mle for d in datas])
    from webcrawl.revisit import EffectiveData

    priors = fit_group_priors(group, EffectiveData(events, exposure, mle), prior, ngroups=ngroups)
    for i, start in enumerate(range(0, n, _CHUNK)):
        part = rows[start:start + _CHUNK]
        g = group[start:start + _CHUNK]
        rates[start:start + len(part)] = estimate_rates(
            tables[i], priors.shape[g], priors.rate[g], datas[i])
    alpha = priors.shape[group] + events
    # The Gamma's rate parameter matched to the posterior mean, which for pages that changed at
    # nearly every visit comes from the exact censored likelihood, not the effective data.
    with np.errstate(divide="ignore", invalid="ignore"):
        beta = np.where(rates > 0, alpha / rates, priors.rate[group] + exposure)
    return rates, alpha, beta


def _add_readings(table: Any, readings: Readings, start: int) -> None:
    n = len(table)
    quiet = readings.quiet[start:start + n]
    changed = readings.changed[start:start + n]
    rows = np.flatnonzero((quiet > 0) & (changed <= 0))
    if len(rows):
        table.observe(rows, quiet[rows], False)
    rows = np.flatnonzero(changed > 0)
    if len(rows):
        table.observe(rows, changed[rows], True)
        # The quiet span after a change seen: its own unchanged observation.
        after = rows[quiet[rows] > 0]
        if len(after):
            table.unchanged_seconds[after] += quiet[after]
            table.seconds[after] += quiet[after]


def plan(a: AllocInput) -> AllocResult:
    rows, host = a.rows, a.host
    n, nhosts = len(rows), len(a.delay)
    R = max(a.budget_rate, 0.0)
    rows, confirmed, stale = sitemap_readings(rows, a.sitemap_trusted[host])
    readings = listing_readings(rows, a.listed, LISTED_SHARE) if a.listed is not None else None
    rate, alpha, beta = posterior(rows, a.prior, readings)
    kind = rows["kind"]
    types = rows["type"].astype(np.intp)
    tier = rows["tier"].astype(np.intp)
    type_tier = np.array([a.type_tier.get(t, 1) for t in range(int(types.max(initial=0)) + 1)])
    tier = np.where((tier >= 1) & (tier <= 4), tier, type_tier[types] if n else tier)
    value = TIER_VALUES[np.clip(tier, 0, 4)]
    own = np.where(rows["billed_n"] > 0, rows["billed"] / np.maximum(rows["billed_n"], 1), np.nan)
    type_cost = _type_means(types, own, a.default_cost)
    cost = np.where(np.isfinite(own), own, type_cost[types]) * a.health[host]
    cost = np.maximum(cost, 1e-9)
    retired = rows["state"] >= REMOVED
    sitemap = (kind == KIND_SITEMAP) & ~retired
    hub = kind == KIND_HUB
    listing = (np.isin(types, list(a.listing_types)) | a.seed | hub) & ~retired
    detector = sitemap | listing
    page = (kind != KIND_SITEMAP) & ~retired
    interval = np.full(n, np.inf)
    typical = float(np.median(cost[page])) if page.any() else a.default_cost
    figures: dict[str, float] = {"known": float((page & ~hub).sum()), "sitemaps": float(sitemap.sum()),
                                 "hubs": float((hub & ~retired).sum()), "retired": float(retired.sum())}

    # Hosts: capacity per second, less backoff holds.
    avail = 1.0 - np.clip((a.hold_until - a.now) / max(a.period, 1e-9), 0.0, 1.0)
    capacity = UTILISATION / np.maximum(a.delay, 1e-3) * avail

    # Discovery: new URLs first while many wait (a page never fetched is all stale), at least
    # the site's share while any wait.
    share_d = 0.0
    if a.backlog > 0:
        # ... fetched within DISCOVERY_SECONDS, and within half a cycle when cycles are shorter.
        horizon = min(DISCOVERY_SECONDS, max(a.cycle_seconds, 1e-9) / 2)
        wanted = a.backlog * typical / max(R * horizon, 1e-9)
        share_d = min(DISCOVERY_MAX, max(a.shares["discovery"], wanted))
    capacity_left = capacity * (1.0 - share_d)

    # Detectors: sitemaps on their period (faster where their dates are trusted), then listing
    # pages and seeds on what is left of the share, each read at least every few cycles.
    det_budget = a.shares["detectors"] * R
    trusted_row = a.sitemap_trusted[host]
    sm_interval = np.where(trusted_row, a.sitemap_seconds / 4, a.sitemap_seconds)
    sm_interval = np.maximum(sm_interval, np.maximum(2 * a.delay[host], 1.0))
    sm_spend = float((cost[sitemap] / sm_interval[sitemap]).sum())
    if sm_spend > det_budget > 0:
        sm_interval = sm_interval * (sm_spend / det_budget)
        sm_spend = det_budget
    interval[sitemap] = sm_interval[sitemap]
    others = listing & page
    rest = max(det_budget - sm_spend, 0.0)
    if others.any():
        # Reads at f_i = rest sqrt(rate_i / cost_i) / sum_j sqrt(rate_j cost_j): the least mean
        # wait for a change to be seen (new pages on a hub, new summaries on a listing).
        weight = np.sqrt(np.maximum(rate, 1e-12) / cost)
        each = rest * weight / max(float((cost * weight)[others].sum()), 1e-12)
        det_iv = np.clip(1.0 / np.maximum(each, 1e-12), np.maximum(2 * a.delay[host], 1.0),
                         max(DETECTOR_MAX_CYCLES * a.cycle_seconds, 1.0))
        interval[others] = det_iv[others]
    det_rate = np.where(detector, 1.0 / interval, 0.0)
    det_spend = float((cost * det_rate).sum())
    capacity_left = np.maximum(capacity_left - np.bincount(host, det_rate, minlength=nhosts), 0.0)
    # How long a change waits to be seen by a detector: half a sitemap period on hosts whose
    # dates are trusted (or what followed changes there actually waited, when longer: the
    # queue, the host's turns), half the host's listing period elsewhere.
    host_listing_iv = _host_mean(host, np.where(others, interval, np.nan), nhosts)
    waited = followed_lag(rows, host, nhosts)
    detect = np.where(trusted_row, np.fmax(sm_interval / 2, waited[host]), host_listing_iv[host] / 2)
    visible = np.where(trusted_row, 1.0, LISTED_SHARE)

    # Re-estimation floor and the verification sample.
    polled = page & ~detector
    floor_rate = 0.0
    if polled.any() and a.shares["reestimation"] > 0:
        floor_rate = a.shares["reestimation"] * R / float(cost[polled].sum())
    floor_spend = floor_rate * float(cost[polled].sum())  # at most; less once pages poll above it
    rng = np.random.default_rng(a.seed_rng)
    candidates = np.flatnonzero(polled & (rows["last_fetched"] > 0))
    k = int(round(a.shares["verification"] * R * a.period / max(typical, 1e-9)))
    verify = rng.choice(candidates, size=min(k, len(candidates)), replace=False) if k and len(
        candidates) else np.zeros(0, dtype=np.intp)
    ver_spend = a.shares["verification"] * R if len(verify) else 0.0

    # Which pages a known change should make due (following), then water-filling over the
    # polled pages (a followed page polled only for the changes no detector sees), each priced
    # at one budget multiplier; the floor tops up what is left
    # under it and costs only that top-up (re-solved once, as it changes the budget left).
    f = np.zeros(n)
    follow = np.zeros(n, dtype=bool)
    trig_spend = 0.0
    mu = np.inf
    for _ in range(2):
        revisit_budget = max(R - share_d * R - det_spend - floor_spend - ver_spend, 0.0) * a.gain
        follow, fetch_rate, poll_rate, poll_value = _follow(
            rate, value, cost, detect, visible, polled, revisit_budget, a.objective)
        trig_spend = float((cost * fetch_rate)[follow].sum())
        trig_load = np.bincount(host[follow], fetch_rate[follow], minlength=nhosts)
        f[:] = 0.0
        if polled.any() and revisit_budget - trig_spend > 0:
            rows_free = np.flatnonzero(polled)
            alloc = allocate_rates(poll_rate[rows_free], poll_value[rows_free], cost[rows_free],
                                   host[rows_free], np.maximum(capacity_left - trig_load, 0.0),
                                   revisit_budget - trig_spend, objective=a.objective)
            f[rows_free] = alloc.frequency
            mu = alloc.mu
            figures["plan:revisit"] = alloc.spend_rate
        floor_spend = float((cost * np.maximum(floor_rate - f, 0.0))[polled].sum())
    f[polled] = np.maximum(f[polled], floor_rate)
    with np.errstate(divide="ignore"):
        interval[polled] = np.where(f[polled] > 0, 1.0 / np.where(f[polled] > 0, f[polled], 1.0),
                                    np.inf)
    figures.update({
        "plan:detectors": det_spend, "plan:floor": floor_spend, "plan:verification": ver_spend,
        "plan:triggers": trig_spend, "plan:discovery": share_d * R, "discovery_share": share_d,
        "typical_cost": typical, "budget_rate": R, "gain": a.gain,
        "mu": float(mu) if np.isfinite(mu) else -1.0, "follow": float(follow.sum()),
        "visited": float((f[polled] > floor_rate * 1.0001).sum()),
    })
    for t in np.unique(types):
        figures[f"cost:{int(t)}"] = float(type_cost[t])
    figures.update(_freshness(rows, confirmed, stale, alpha, beta, value, page & ~hub, a.now,
                              a.backlog))
    return AllocResult(interval, np.asarray(verify, dtype=np.intp), rate, value, cost, follow, figures)


def followed_lag(rows: np.ndarray, host: NDArray[np.intp], nhosts: int,
                 min_samples: int = LAG_SAMPLES) -> Floats:
    """Per host, how long followed changes waited before their fetch: over pages followed whose
    last fetch found the change a sitemap dated after the fetch before it, the mean of
    ``last fetch - date``; NaN where fewer than ``min_samples`` pages say."""
    previous = rows["last_fetched"] - rows["last_interval"]
    date = rows["lastmod"]
    ok = ((rows["follow"] == 1) & (rows["last_changed"] == 1) & (date > previous)
          & (date <= rows["last_fetched"]))
    lag = rows["last_fetched"] - date
    sums = np.bincount(host[ok], lag[ok], minlength=nhosts)
    counts = np.bincount(host[ok], minlength=nhosts)
    return np.where(counts >= min_samples, sums / np.maximum(counts, 1), np.nan)


def _host_mean(host: NDArray[np.intp], x: Floats, nhosts: int) -> Floats:
    ok = np.isfinite(x)
    sums = np.bincount(host[ok], x[ok], minlength=nhosts)
    counts = np.bincount(host[ok], minlength=nhosts)
    return np.where(counts > 0, sums / np.maximum(counts, 1), np.inf)


def _follow(rate: Floats, value: Floats, cost: Floats, detect: Floats, visible: Floats,
            polled: NDArray[np.bool_], budget: float, objective: Objective
            ) -> tuple[NDArray[np.bool_], Floats, Floats, Floats]:
    """Which pages a known change should make due at once, the fetch rate that costs, and the
    change rate and value left for polling each page.

    A followed page is fetched after each change a detector can see (share ``s`` of its
    changes, seen ``d`` seconds late on average): ``rate s / (1 + rate s d)`` fetches per second,
    and it is fresh of those changes ``g = 1 / (1 + rate s d)`` of the time; the changes no
    detector sees (rate ``rate (1 - s)``) are left to polling, worth ``value g``. At the budget's
    multiplier ``mu`` each page takes the option worth more, ``value * freshness - mu * spend``
    (polling alone, or following plus polling for the rest), and ``mu`` is bisected so the chosen
    options spend the budget (host capacities are left to the water-filling that follows). Pages
    that change too fast to keep fresh are never worth following. Under the events objective a
    followed page catches each change a detector sees: ``rate s`` events per second."""
    n = len(rate)
    follow = np.zeros(n, dtype=bool)
    fetches = np.zeros(n)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        lag = np.where(np.isfinite(detect), detect, np.inf)
        k_all = rate * visible / (1.0 + rate * visible * lag)
        eligible = polled & np.isfinite(lag) & (rate > 0) & (value > 0) & (k_all > 0)
    if not eligible.any() or budget <= 0:
        return follow, fetches, rate, value
    rows = np.flatnonzero(polled)
    r, v, c, k, s = rate[rows], value[rows], cost[rows], k_all[rows], visible[rows]
    ok = eligible[rows]
    r_rest = r * (1.0 - s)
    with np.errstate(divide="ignore", invalid="ignore"):
        g = np.where(ok, 1.0 / (1.0 + r * s * np.where(ok, lag[rows], 0.0)), 1.0)
    v_rest = v * g

    def gain(rr: Floats, vv: Floats, f: Floats) -> Floats:
        if objective is Objective.EVENTS:
            with np.errstate(divide="ignore", invalid="ignore"):
                return vv * np.where(f > 0, f * -np.expm1(-rr / np.where(f > 0, f, 1.0)), 0.0)
        return vv * expected_freshness(rr, f)

    follow_base = v * r * s if objective is Objective.EVENTS else 0.0

    def choose(mu: float) -> tuple[NDArray[np.bool_], Floats]:
        f_poll = frequencies(mu * c, r, v, objective)
        f_rest = frequencies(mu * c, r_rest, v_rest, objective)
        poll = gain(r, v, f_poll) - mu * c * f_poll
        both = follow_base + gain(r_rest, v_rest, f_rest) - mu * c * (k + f_rest)
        fol = ok & (both > poll)
        return fol, c * np.where(fol, k + f_rest, f_poll)

    lo, hi = -60.0, 60.0
    for _ in range(48):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if float(choose(float(np.exp(mid)))[1].sum()) > budget else (lo, mid)
    fol, _ = choose(float(np.exp(hi)))
    follow[rows] = fol
    fetches[rows] = np.where(fol, k, 0.0)
    rest_rate = rate.copy()
    rest_value = value.copy()
    rest_rate[rows] = np.where(fol, r_rest, r)
    rest_value[rows] = np.where(fol, v_rest, v)
    return follow, fetches, rest_rate, rest_value


def _type_means(types: NDArray[np.intp], own: Floats, default: float) -> Floats:
    ngroups = int(types.max(initial=0)) + 1
    measured = np.isfinite(own)
    sums = np.bincount(types[measured], own[measured], minlength=ngroups)
    counts = np.bincount(types[measured], minlength=ngroups)
    return np.where(counts > 0, sums / np.maximum(counts, 1), default)


def sitemap_readings(rows: np.ndarray, trusted: NDArray[np.bool_]
                     ) -> tuple[np.ndarray, Floats, NDArray[np.bool_]]:
    """What trusted sitemap dates read since a page's last fetch tell: a date no later than the
    fetch says the copy was still current when the date was read (an unchanged observation
    for the rate model, and the time the copy was last known current); a later date says the
    copy is stale (a change the fetch it triggers will observe). Dates of untrusted hosts say
    nothing. Returns the rows with those unchanged observations added, each page's time last
    known current, and which copies are known stale."""
    fetched = rows["last_fetched"]
    read = trusted & (rows["lastmod"] > 0) & (rows["lastmod_read"] > fetched) & (fetched > 0)
    current = read & (rows["lastmod"] <= fetched)
    confirmed = np.where(current, rows["lastmod_read"], fetched)
    if current.any():
        rows = rows.copy()
        extra = (rows["lastmod_read"] - fetched)[current]
        rows["visits"][current] += 1
        rows["seconds"][current] += extra
        rows["unchanged_seconds"][current] += extra
    return rows, confirmed, read & ~current


def _freshness(rows: np.ndarray, confirmed: Floats, stale: NDArray[np.bool_], alpha: Floats,
               beta: Floats, value: Floats, page: NDArray[np.bool_], now: float,
               backlog: float) -> dict[str, float]:
    """The model's estimate of the copy's freshness now: each fetched page is fresh with its
    posterior chance of no change since it was last known current (its fetch, or a trusted
    sitemap date read since), ``E[exp(-rate t)] = (beta / (beta + t))^alpha`` under its
    Gamma(alpha, beta) posterior (not ``exp(-mean rate * t)``, which undercounts: a page the
    model knows little about could be slow as well as fast); copies a trusted date shows stale,
    and pages discovered but not fetched (the backlog at the mean value), count as stale."""
    fetched = page & (rows["last_fetched"] > 0)
    since = np.maximum(now - confirmed, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        fresh = np.where(fetched & (beta > 0) & ~stale, (beta / (beta + since)) ** alpha, 0.0)
    n = float(fetched.sum())
    out = {"fetched": n}
    if n == 0:
        return {**out, "freshness": 0.0, "freshness_value": 0.0}
    mean_value = float(value[fetched].mean())
    out["freshness"] = float(fresh[fetched].sum() / (n + backlog))
    out["freshness_value"] = float((value * fresh)[fetched].sum()
                                   / (value[fetched].sum() + backlog * mean_value))
    for t in np.unique(rows["type"][fetched]):
        mask = fetched & (rows["type"] == t)
        out[f"freshness:{int(t)}"] = float(fresh[mask].mean())
        out[f"pages:{int(t)}"] = float(mask.sum())
    return out
