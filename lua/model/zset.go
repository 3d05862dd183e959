package model

import (
	"cmp"
	"slices"
	"strings"
)

// zset is a sorted set: members in order of score, then of their bytes, as
// Redis orders them. A slice kept in order: the scripts keep a distinct
// window to its threshold and one more (at most 10,001 members).
type zset struct {
	scores map[string]float64
	sorted []member
}

type member struct {
	score float64
	name  string
}

func compare(a, b member) int {
	return cmp.Or(cmp.Compare(a.score, b.score), cmp.Compare(a.name, b.name))
}

func (z *zset) insert(m member) {
	i, _ := slices.BinarySearchFunc(z.sorted, m, compare)
	z.sorted = slices.Insert(z.sorted, i, m)
	z.scores[m.name] = m.score
}

func (z *zset) remove(m member) {
	if i, ok := slices.BinarySearchFunc(z.sorted, m, compare); ok {
		z.sorted = slices.Delete(z.sorted, i, i+1)
	}
	delete(z.scores, m.name)
}

// add is ZADD of one member, with GT when gt: a new member is added, an
// existing one takes the score (with GT, only a greater one). It returns
// how many members were added.
func (z *zset) add(name string, score float64, gt bool) int64 {
	old, ok := z.scores[name]
	switch {
	case !ok:
		name = strings.Clone(name)
		z.insert(member{score, name})
		return 1
	case old == score || (gt && score <= old):
		return 0
	}
	z.remove(member{old, name})
	z.insert(member{score, name})
	return 0
}

// count is ZCOUNT key (min max: the members scored above min and at most
// max.
func (z *zset) count(min, max float64) int64 {
	from, _ := slices.BinarySearchFunc(z.sorted, min, func(m member, t float64) int {
		if m.score <= t {
			return -1
		}
		return 1
	})
	to, _ := slices.BinarySearchFunc(z.sorted, max, func(m member, t float64) int {
		if m.score <= t {
			return -1
		}
		return 1
	})
	return int64(to - from)
}

// removeRanks is ZREMRANGEBYRANK start stop, with Redis's negative ranks
// (from the end) and bounds.
func (z *zset) removeRanks(start, stop int64) {
	n := int64(len(z.sorted))
	if start < 0 {
		start += n
	}
	if stop < 0 {
		stop += n
	}
	start = max(start, 0)
	if start > stop || start >= n {
		return
	}
	stop = min(stop, n-1)
	for _, m := range z.sorted[start : stop+1] {
		delete(z.scores, m.name)
	}
	z.sorted = slices.Delete(z.sorted, int(start), int(stop+1))
}

// removeUpTo is ZREMRANGEBYSCORE -inf max.
func (z *zset) removeUpTo(max float64) {
	to, _ := slices.BinarySearchFunc(z.sorted, max, func(m member, t float64) int {
		if m.score <= t {
			return -1
		}
		return 1
	})
	for _, m := range z.sorted[:to] {
		delete(z.scores, m.name)
	}
	z.sorted = slices.Delete(z.sorted, 0, to)
}

// The keyspace's sorted-set commands. A set left empty is removed, as
// Redis removes it.

func (s *Store) zsetOf(key string) (*zset, error) {
	e, err := s.typed(key, kindZSet)
	if e == nil {
		return nil, err
	}
	return e.zset, nil
}

func (s *Store) zcard(key string) (int64, error) {
	z, err := s.zsetOf(key)
	if z == nil {
		return 0, err
	}
	return int64(len(z.sorted)), nil
}

func (s *Store) zscore(key, name string) (score float64, ok bool, err error) {
	z, err := s.zsetOf(key)
	if z == nil {
		return 0, false, err
	}
	score, ok = z.scores[name]
	return score, ok, nil
}

func (s *Store) zcount(key string, min, max float64) (int64, error) {
	z, err := s.zsetOf(key)
	if z == nil {
		return 0, err
	}
	return z.count(min, max), nil
}

func (s *Store) zadd(key, name string, score float64, gt bool) (int64, error) {
	e, err := s.create(key, kindZSet)
	if err != nil {
		return 0, err
	}
	return e.zset.add(name, score, gt), nil
}

func (s *Store) zremRanks(key string, start, stop int64) error {
	z, err := s.zsetOf(key)
	if z == nil {
		return err
	}
	z.removeRanks(start, stop)
	s.dropEmpty(key, z)
	return nil
}

func (s *Store) zremUpTo(key string, max float64) error {
	z, err := s.zsetOf(key)
	if z == nil {
		return err
	}
	z.removeUpTo(max)
	s.dropEmpty(key, z)
	return nil
}

func (s *Store) dropEmpty(key string, z *zset) {
	if len(z.sorted) == 0 {
		delete(s.keys, key)
	}
}
