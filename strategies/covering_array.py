"""covertable's greedy covering array, its constraints read as tables of value tuples.

The coverage phase's plans (``configurations.plan``) are covertable's greedy generator with
constraints of one kind: a function of a few dimensions' values (an illegal tuple's
dimensions, a finding's needs) that is False where a row must not go. covertable 3.2 checks
them through its general condition engine: for every check it converts the partial row from
value serials to values, resolves each required field by name and calls the function, and a
plan checks millions of times (pruning every tuple before the first row forward-checks each
one against every other dimension's domain). On a nightly campaign of a kernel with findings
that was most of the coverage phase's planning time.

``ForbiddenTupleController`` is covertable's ``Controller`` with those checks answered from a
table per constraint: the required dimensions' serials as the key, the function called once
per distinct key (its answer is a pure function of those values). Nothing else changes: the
same constraints in the same order, the same three-valued answers (None while a required
dimension has no value), the same search, so the same rows. It is used only with the
covertable version it was written against (``SUPPORTED``: it overrides that version's
internals); any other version plans with covertable's own ``make_async``.
Pinned: tests/test_covering_array.py compares its rows with covertable's on random
constraints, presets and salts."""

from functools import lru_cache
from importlib.metadata import PackageNotFoundError, version
from itertools import combinations
from operator import itemgetter

from covertable import make_async, sorters
from covertable.main import Controller

SUPPORTED = "3.2."  # the covertable versions whose Controller internals this class overrides
_UNSEEN = object()


@lru_cache(maxsize=1)
def supported() -> bool:
    try:
        return version("covertable").startswith(SUPPORTED)
    except PackageNotFoundError:
        return False


class ForbiddenTupleController(Controller):
    """covertable's Controller for ``fn`` constraints of string-named dimensions, each
    answered from a memo keyed by its dimensions' serials (``Controller`` evaluates them on
    value rows through ``covertable.evaluate``)."""

    def _resolve_constraints(self, constraints):
        super()._resolve_constraints(constraints)
        # per constraint: (its dimensions in ``requires`` order, the key of a row: those
        # dimensions' serials, key -> the function's answer, the function)
        self._tables = []
        self._checked: dict = {}  # _forward_check's answers
        for rc in self._constraints:
            needs = tuple(rc["condition"]["requires"])
            key_of = itemgetter(*needs) if needs else (lambda row: ())
            self._tables.append((needs, key_of, {}, rc["condition"]["evaluate"]))

    def _holds(self, ci: int, row: dict):
        """Constraint ``ci`` on ``row`` (dimension -> serial): True, False, or None while one
        of its dimensions has no value (covertable's ``evaluate`` of an ``fn`` condition)."""
        needs, key_of, answers, function = self._tables[ci]
        for k in needs:
            if k not in row:
                return None
        key = key_of(row)
        answer = answers.get(key, _UNSEEN)
        if answer is _UNSEEN:
            answer = answers[key] = function(self._to_map_from_dict({k: row[k] for k in needs}))
        return answer

    # the methods of covertable 3.2's Controller that evaluate constraints, each as there with
    # ``eval_condition(condition, value row)`` replaced by ``_holds(index, serial row)``
    def _storable_check(self, candidate, row=None):
        if row is None:
            row = self.row
        if not self._constraints:
            return True
        nxt = None
        for i in range(len(self._constraints)):
            if i in self._passed_indexes:
                continue
            if nxt is None:
                nxt = dict(row)
                nxt.update(candidate)
            if self._holds(i, nxt) is False:
                return False
        return True

    def _mark_passed_constraints(self, row):
        for i in range(len(self._constraints)):
            if i in self._passed_indexes:
                continue
            result = self._holds(i, row)
            if result is True:
                self._passed_indexes.add(i)
            elif result is False:
                return False
        return True

    def set_pair(self, pair):
        candidate = self.get_candidate(pair)
        snapshot = dict(self.row)
        snapshot.update(candidate)
        for i in range(len(self._constraints)):
            if i in self._passed_indexes:
                continue
            if self._holds(i, snapshot) is False:
                return False
        if not self._forward_check(snapshot):
            return False
        for key, value in candidate:
            self.row[key] = value
        self._mark_passed_constraints(self.row)
        return True

    def _viable(self, constraints, row) -> bool:
        """No constraint of ``constraints`` not yet passed is False on ``row`` (``_holds``
        inlined: the forward checks ask this millions of times a nightly campaign)."""
        passed, tables = self._passed_indexes, self._tables
        for ci in constraints:
            if ci in passed:
                continue
            needs, key_of, answers, _ = tables[ci]
            for k in needs:
                if k not in row:
                    break
            else:
                answer = answers.get(key_of(row), _UNSEEN)
                if answer is _UNSEEN:
                    answer = self._holds(ci, row)
                if answer is False:
                    return False
        return True

    def _forward_check(self, snapshot):
        """covertable's forward check, remembered per snapshot of the constrained dimensions:
        a dimension no constraint names is never pruned nor read, so its value (or absence)
        cannot change the answer, and pruning the initial tuples asks again for every tuple
        that differs only there."""
        if not self._constraints:
            return True
        key = (
            tuple(sorted((k, s) for k, s in snapshot.items() if k in self._constraints_by_key)),
            tuple(sorted(self._passed_indexes)),
        )
        answer = self._checked.get(key)
        if answer is None:
            answer = self._checked[key] = self._propagate(snapshot)
        return answer

    def _propagate(self, snapshot):
        domains = {key: list(serials) for key, serials in self.serials.items() if key not in snapshot}
        if not domains:
            return True
        relevant_set = set(range(len(self._constraints)))
        temp_row = dict(snapshot)
        changed = True
        while changed:
            changed = False
            for key in list(domains.keys()):
                domain = domains.get(key)
                if domain is None:
                    continue
                if len(domain) == 0:
                    return False
                key_constraints = self._constraints_by_key.get(key)
                if not key_constraints:
                    continue
                if not any(ci in relevant_set for ci in key_constraints):
                    continue
                surviving = []
                for serial in domain:
                    temp_row[key] = serial
                    if self._viable(key_constraints, temp_row):
                        surviving.append(serial)
                del temp_row[key]
                if len(surviving) == 0:
                    return False
                if len(surviving) < len(domain):
                    domains[key] = surviving
                    changed = True
                    if len(surviving) == 1:
                        temp_row[key] = surviving[0]
                        del domains[key]
                        nc = self._constraints_by_key.get(key)
                        if nc:
                            relevant_set.update(nc)
                if len(surviving) > 1:  # peer propagation for multi-value domains
                    for peer_key in list(domains.keys()):
                        if peer_key == key:
                            continue
                        peer_domain = domains.get(peer_key)
                        if peer_domain is None:
                            continue
                        peer_constraints = self._constraints_by_key.get(peer_key)
                        if not peer_constraints or not (peer_constraints & key_constraints):
                            continue
                        peer_viable = set()
                        for serial in surviving:
                            temp_row[key] = serial
                            for ps in peer_domain:
                                if ps in peer_viable:
                                    continue
                                temp_row[peer_key] = ps
                                if self._viable(peer_constraints, temp_row):
                                    peer_viable.add(ps)
                            if peer_key in temp_row:
                                del temp_row[peer_key]
                        if key in temp_row:
                            del temp_row[key]
                        narrowed = [v for v in peer_domain if v in peer_viable]
                        if len(narrowed) == 0:
                            return False
                        if len(narrowed) < len(peer_domain):
                            domains[peer_key] = narrowed
                            changed = True
                            if len(narrowed) == 1:
                                temp_row[peer_key] = narrowed[0]
                                del domains[peer_key]
                                nc = self._constraints_by_key.get(peer_key)
                                if nc:
                                    relevant_set.update(nc)
        return True

    def _find_conflict_keys(self):
        if not self.is_filled():
            return None
        for i, rc in enumerate(self._constraints):
            if i in self._passed_indexes:
                continue
            if self._holds(i, self.row) is False:
                return rc["keys"]
        return None

    @property
    def is_complete(self):
        if not self.is_filled():
            return False
        if not self._constraints:
            return True
        return self._viable(range(len(self._constraints)), self.row)


class GreedyCriterion:
    """covertable 3.2's greedy criterion (``covertable.criteria.greedy``: the first pair of
    the incomplete ones, in their order, that adds more tuples than the row's size times the
    values it adds, else the one that adds most), yielding the same pairs with less work per
    pair looked at: a pair's conflict with the row is one set test, and of the tuples it would
    complete only those that hold a value it adds are looked up (the others are the row's)."""

    @staticmethod
    def extract(ctrl):
        has_constraints = bool(ctrl._constraints)
        strengths = sorted(ctrl.all_strengths)
        incomplete = ctrl.incomplete
        while True:
            row = ctrl.row
            if ctrl.is_filled():
                return
            row_size = len(row)
            held = set(row.values())
            blocked = {s for key, serial in row.items() for s in ctrl.serials[key] if s != serial}
            invalid = row.invalid_pairs
            best, efficient_pair = None, None
            for pair in incomplete:
                if pair in invalid:
                    continue
                if row_size == 0:
                    added = pair
                elif not blocked.isdisjoint(pair):
                    continue
                else:
                    added = tuple(s for s in pair if s not in held)
                    if not added:
                        continue
                storable = len(added)
                if has_constraints:
                    storable = ctrl.storable(ctrl.get_candidate(pair))
                    if not storable:  # None (a constraint fails) or 0
                        continue
                completed = _completed(held, added, incomplete, strengths)
                if completed + ctrl.tolerance > row_size * abs(storable):
                    efficient_pair = pair
                    break
                if best is None or best < completed:
                    best, efficient_pair = completed, pair
            if efficient_pair is None:
                return
            yield efficient_pair


def _completed(held: set, added: tuple, incomplete: dict, strengths) -> int:
    """Incomplete tuples inside the row's serials ``held`` and ``added`` (serials not held)
    that hold one of ``added`` (covertable's ``get_num_removable_pairs`` less the row's own)."""
    added = sorted(added)
    rest = sorted(held)
    n = 0
    for s in strengths:
        for k in range(1, min(s, len(added)) + 1):
            for some in combinations(added, k):
                for others in combinations(rest, s - k):
                    if tuple(sorted(some + others)) in incomplete:
                        n += 1
    return n


def _tabled(constraints) -> bool:
    """Every constraint an ``fn`` of plain dimension names (no dotted path, no index)."""
    return all(
        c.get("operator") == "fn" and all(isinstance(k, str) and "." not in k for k in c["requires"])
        for c in constraints
    )


def covering_rows(factors: dict, *, strength: int, salt: str, presets: list, constraints: list):
    """covertable's ``make_async(factors, strength, salt, presets, constraints)``, lazily:
    with ``ForbiddenTupleController`` where this covertable is ``SUPPORTED`` and every
    constraint is an ``fn`` of named dimensions, else covertable's own."""
    if not supported() or not _tabled(constraints):
        return make_async(factors, strength=strength, salt=salt, presets=presets, constraints=constraints or None)
    ctrl = ForbiddenTupleController(
        factors,
        strength=strength,
        sorter=sorters.hash,
        criterion=GreedyCriterion,
        salt=salt,
        presets=presets,
        constraints=constraints or None,
    )
    return ctrl.make_async()
