package stop

import (
	"sync"
	"time"
)

// cache keeps, per condition, the last result and the fingerprint of the
// inputs it was computed from. A lookup hits only when the fingerprint is
// the same, so a cached result is never stale; results of external checks
// (commands) must also be younger than the TTL, because the world they
// read is not part of the fingerprint.
type cache struct {
	mu      sync.Mutex
	entries map[*Condition]cacheEntry
}

type cacheEntry struct {
	key      uint64
	at       time.Time
	external bool
	res      Result
}

func newCache() *cache { return &cache{entries: map[*Condition]cacheEntry{}} }

// get returns the cached result for c when key matches and, for external
// checks, it is younger than ttl.
func (c *cache) get(cond *Condition, key uint64, now time.Time, ttl time.Duration) (Result, bool) {
	c.mu.Lock()
	e, ok := c.entries[cond]
	c.mu.Unlock()
	if !ok || e.key != key {
		return Result{}, false
	}
	if e.external && now.Sub(e.at) >= ttl {
		return Result{}, false
	}
	return e.res, true
}

func (c *cache) put(cond *Condition, key uint64, external bool, now time.Time, r Result) {
	c.mu.Lock()
	c.entries[cond] = cacheEntry{key: key, at: now, external: external, res: r}
	c.mu.Unlock()
}

func (c *cache) drop(cond *Condition) {
	c.mu.Lock()
	delete(c.entries, cond)
	c.mu.Unlock()
}

func (c *cache) clear() {
	c.mu.Lock()
	clear(c.entries)
	c.mu.Unlock()
}
