package schemareg

import (
	"container/list"
	"sync"
	"time"
)

// cache keeps compiled schemas by id (ids are immutable), bounded in
// entries and in schema text bytes, least recently used out first. A miss
// on an id that is being fetched waits for that fetch: one request per new
// id per host. Unknown ids are remembered for negativeTTL, in at most
// maxEntries, so a flood of records with ids the registry does not have
// does not become a flood of requests.
type cache struct {
	mu                   sync.Mutex
	maxEntries, maxBytes int
	bytes                int
	lru                  *list.List // of *Schema, most recent first
	byID                 map[int]*list.Element
	loading              map[int]*load
	unknown              map[int]unknownID
}

type load struct {
	done chan struct{}
	s    *Schema
	err  error
	// waiting counts the lookups waiting on this fetch (under cache.mu),
	// for the tests.
	waiting int
}

type unknownID struct {
	until time.Time
	err   error
}

func newCache(entries, bytes int) *cache {
	return &cache{maxEntries: entries, maxBytes: bytes, lru: list.New(), byID: map[int]*list.Element{}, loading: map[int]*load{}, unknown: map[int]unknownID{}}
}

// get returns the schema of id, calling fetch on a miss (once for all who
// miss at the same time). hit says whether this lookup was answered without
// a fetch of its own: in the cache (or known unknown), or fetched by the
// lookup of the same id already in flight, which it waited for. So the
// misses count the fetches, one per new id per host, and hits plus misses
// count the lookups.
func (c *cache) get(id int, fetch func() (*Schema, error)) (s *Schema, hit bool, err error) {
	c.mu.Lock()
	if e, ok := c.byID[id]; ok {
		c.lru.MoveToFront(e)
		c.mu.Unlock()
		return e.Value.(*Schema), true, nil
	}
	if u, ok := c.unknown[id]; ok {
		if time.Now().Before(u.until) {
			c.mu.Unlock()
			return nil, true, u.err
		}
		delete(c.unknown, id)
	}
	if l, ok := c.loading[id]; ok {
		l.waiting++
		c.mu.Unlock()
		<-l.done
		return l.s, true, l.err
	}
	l := &load{done: make(chan struct{})}
	c.loading[id] = l
	c.mu.Unlock()

	l.s, l.err = fetch()

	c.mu.Lock()
	delete(c.loading, id)
	if l.err == nil {
		c.put(l.s)
	} else if e, ok := l.err.(*Error); ok && e.Kind == NotFound {
		if len(c.unknown) >= c.maxEntries {
			clear(c.unknown)
		}
		c.unknown[id] = unknownID{until: time.Now().Add(negativeTTL), err: l.err}
	}
	c.mu.Unlock()
	close(l.done)
	return l.s, false, l.err
}

// cached is cache.get with the lookup counted in c.Stats.
func (c *Client) cached(id int, fetch func() (*Schema, error)) (*Schema, error) {
	s, hit, err := c.cache.get(id, fetch)
	if hit {
		c.Stats.CacheHits.Add(1)
	} else {
		c.Stats.CacheMisses.Add(1)
	}
	return s, err
}

// put adds s (under c.mu), evicting the least recently used schemas until
// both bounds hold. A schema larger than the whole byte bound is used but
// not kept.
func (c *cache) put(s *Schema) {
	if s.size > c.maxBytes {
		return
	}
	if e, ok := c.byID[s.ID]; ok {
		c.remove(e)
	}
	c.byID[s.ID] = c.lru.PushFront(s)
	c.bytes += s.size
	for c.lru.Len() > c.maxEntries || c.bytes > c.maxBytes {
		c.remove(c.lru.Back())
	}
}

func (c *cache) remove(e *list.Element) {
	s := c.lru.Remove(e).(*Schema)
	delete(c.byID, s.ID)
	c.bytes -= s.size
}

// waiting is the number of lookups waiting on the fetch of id, for the
// tests.
func (c *cache) waiting(id int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if l, ok := c.loading[id]; ok {
		return l.waiting
	}
	return 0
}

// len is the number of schemas and their bytes, for the tests.
func (c *cache) len() (int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len(), c.bytes
}
