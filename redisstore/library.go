package redisstore

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// luaFS holds the sources of the Lua library that decides in Redis, one
// file per algorithm and per shared part, each opening with what it
// depends on and which Go functions it translates.
//
//go:embed lua/*.lua
var luaFS embed.FS

// libraryFiles lists the library's files in the order they are joined:
// each uses only what the files before it define.
var libraryFiles = []string{
	"prelude.lua",
	"time.lua",
	"arith.lua",
	"meter.lua",
	"gcra.lua",
	"intervalrefill.lua",
	"fixedwindow.lua",
	"slidinglog.lua",
	"slidingcounter.lua",
	"leases.lua",
	"decide.lua",
	"io.lua",
	"single.lua",
	"group.lua",
	"register.lua",
}

// A library is a Redis Functions library: its name, which carries a hash
// of its files, its source, and the names of its functions, which start
// with its name. Functions share one namespace on a server, so two
// versions of the library, say during a rolling deploy, are loaded side
// by side and each process calls only its own.
type library struct {
	name   string
	source string
	apply  string // one decision: Store.Apply, Store.ApplyBatch
	group  string // a group's decision: Store.ApplyGroup
}

// lib is the library the store runs.
var lib = newLibrary("sluice", libraryFiles...)

// newLibrary returns the library made of files, named prefix and the
// first 16 hex digits of the SHA-256 of their text. Before the files, its
// source sets LIBRARY to that name.
func newLibrary(prefix string, files ...string) library {
	var body strings.Builder
	for _, f := range files {
		text, err := luaFS.ReadFile("lua/" + f)
		if err != nil {
			panic(err) // a listed file missing from lua/: every test fails at start
		}
		body.Write(text)
	}
	sum := sha256.Sum256([]byte(body.String()))
	name := prefix + "_" + hex.EncodeToString(sum[:8])
	return library{
		name:   name,
		source: "#!lua name=" + name + "\nlocal LIBRARY = '" + name + "'\n" + body.String(),
		apply:  name + "_apply",
		group:  name + "_group",
	}
}

// load loads l on node, unless node holds it already. A library of l's
// name is l itself, whose name is its source's hash, so it is loaded
// without REPLACE: when a server lacks it, every caller that finds it
// missing loads it at once, and all but the first find it there, at a
// small part of the cost of compiling it again (24 µs against 1.7 ms on a
// loaded Redis 7.0).
func (l *library) load(ctx context.Context, node redis.Cmdable) error {
	err := node.FunctionLoad(ctx, l.source).Err()
	if err != nil && !redis.HasErrorPrefix(err, "Library '"+l.name+"' already exists") {
		return fmt.Errorf("redisstore: loading function library %s: %w", l.name, err)
	}
	return nil
}

// missing reports whether err is a node's answer that the function called
// does not exist: the node does not hold the library (a new server, a
// promoted replica that never had it, a node added to a Cluster, FUNCTION
// FLUSH). Such a call did not run.
func missing(err error) bool {
	return redis.HasErrorPrefix(err, "Function not found")
}

// loads records the loads of one round of calls sent again, so that a
// node whose library many calls found missing loads it once.
type loads map[redis.UniversalClient]error

// load loads the library where a call on the Redis key name found it
// missing: on the node that serves name or, with everywhere and a Cluster
// client, on every master, for a call that found it missing again (the
// client may have routed it by a newer slot layout than the one that named
// the node, or, after ASK, to a master importing the slot).
func (s *Store) load(ctx context.Context, done loads, name string, everywhere bool) error {
	c, cluster := s.client.(*redis.ClusterClient)
	var node redis.UniversalClient // nil for every master of c
	if !cluster || !everywhere {
		var err error
		if node, err = s.master(ctx, name); err != nil {
			return err
		}
	}
	if err, ok := done[node]; ok {
		return err
	}
	var err error
	if node == nil {
		err = c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			return lib.load(ctx, m)
		})
	} else {
		err = lib.load(ctx, node)
	}
	done[node] = err
	return err
}

// call runs fn of the library on the Redis keys names, which share a slot,
// with input args, and returns its reply. A call that finds the library
// missing loads it and is sent again, at most twice.
func (s *Store) call(ctx context.Context, fn string, names []string, args string) (any, error) {
	reply, err := s.client.FCall(ctx, fn, names, args).Result()
	for attempt := 0; attempt < 2 && missing(err); attempt++ {
		if err = s.load(ctx, loads{}, names[0], attempt > 0); err != nil {
			break
		}
		reply, err = s.client.FCall(ctx, fn, names, args).Result()
	}
	s.reload.failed(err)
	return reply, err
}
