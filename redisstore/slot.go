package redisstore

import (
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-go/sluice"
	"github.com/sluice-go/sluice/engine"
)

// ErrCrossSlot reports a group of limits whose keys a Cluster keeps in
// different slots (or a Ring on different shards): one script call
// cannot reach them all, and the store refuses the group rather than
// decide it one key at a time. Give the keys of one client's limits a
// common hash tag, as in "{api:KEY}:second" and "{api:KEY}:day". It wraps
// [sluice.ErrUnsupported].
var ErrCrossSlot = fmt.Errorf("%w: redisstore: keys of one group in different slots", sluice.ErrUnsupported)

// sameSlot returns an error wrapping ErrCrossSlot unless every Redis key
// of names is where the client sends the first: on a Cluster client, in
// its hash slot; on a Ring, which shards by hash tag, under its tag. Any
// other client has one server, which holds them all.
func (s *Store) sameSlot(ops []engine.GroupOp, names []string) error {
	switch s.client.(type) {
	case *redis.ClusterClient:
		first := slot(names[0])
		for i, name := range names[1:] {
			if other := slot(name); other != first {
				return fmt.Errorf("%w: key %q is in slot %d, key %q in slot %d",
					ErrCrossSlot, ops[0].Key, first, ops[i+1].Key, other)
			}
		}
	case *redis.Ring:
		first := hashTag(names[0])
		for i, name := range names[1:] {
			if other := hashTag(name); other != first {
				return fmt.Errorf("%w: key %q has the hash tag %q, key %q the tag %q, which a Ring may shard apart",
					ErrCrossSlot, ops[0].Key, first, ops[i+1].Key, other)
			}
		}
	}
	return nil
}

// numSlots is how many hash slots a Redis Cluster has.
const numSlots = 16384

// slot returns the Redis Cluster hash slot of the Redis key name: the
// CRC16 of its hash tag, modulo 16384, as Redis computes it.
func slot(name string) uint16 {
	return crc16(hashTag(name)) % numSlots
}

// hashTag returns the part of the Redis key name that Redis hashes: what
// lies between the first "{" and the first "}" after it, if that is not
// empty, and otherwise the whole name.
func hashTag(name string) string {
	if open := strings.IndexByte(name, '{'); open >= 0 {
		if n := strings.IndexByte(name[open+1:], '}'); n > 0 {
			return name[open+1 : open+1+n]
		}
	}
	return name
}

// crc16 is the CRC-16/XMODEM of s that Redis Cluster uses: polynomial
// 0x1021, initial value 0, bits most significant first, no final xor.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc = crc<<8 ^ crcTable[byte(crc>>8)^s[i]]
	}
	return crc
}

// crcTable holds the CRC of each byte value, shifted in from the top.
var crcTable = func() (t [256]uint16) {
	for b := range t {
		crc := uint16(b) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
		t[b] = crc
	}
	return t
}()
