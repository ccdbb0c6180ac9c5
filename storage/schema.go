package storage

// migrate brings a store written by schema from up to SchemaVersion, in
// the open's one write transaction: it all lands, or (on any error)
// nothing does and the store stays as the older build left it.
//
// Schema 2 adds indexes that keep open in time independent of history:
// runs.live (runs still running), meta streams.bytes (the stream total)
// and tokens.due (tokens by when they may be pruned). Each is built once
// here, by one walk of the history, so that open never walks it.
//
// Schema 3 keeps a revoked token as a tombstone (tokens.revoked, by day;
// see tombstones.go) instead of its whole record, and indexes the records
// left by session (tokens.session). Revoked records become tombstones
// (their tokens.due entries go with them); the rest get their session
// entries.
func migrate(tx *Tx, from int) error {
	if from < 2 {
		if err := tx.bucket(bucketRuns).ForEach(func(k, v []byte) error {
			var r RunRecord
			if err := decodeRecord("runs", string(k), v, &r); err != nil {
				return err
			}
			if r.Status != RunRunning {
				return nil
			}
			return tx.bucket(bucketLiveRuns).Put(k, present)
		}); err != nil {
			return err
		}
		sizes, err := tx.StreamSizes()
		if err != nil {
			return err
		}
		var total uint64
		for _, n := range sizes {
			total += n
		}
		if err := tx.addStreamTotal(total, tx.StreamTotal()); err != nil {
			return err
		}
		if err := tx.EachToken(func(r TokenRecord) error {
			return tx.bucket(bucketTokenAge).Put(tokenDue(&r), present)
		}); err != nil {
			return err
		}
	}
	if from < 3 {
		// Collect first: bbolt forbids writes during a bucket walk.
		var all []TokenRecord
		if err := tx.EachToken(func(r TokenRecord) error {
			all = append(all, r)
			return nil
		}); err != nil {
			return err
		}
		// What PutToken would do for each, without decoding every record
		// a second time (a store of 100k runs holds 100k revoked ones).
		for _, r := range all {
			if r.Revoked == nil {
				if r.Session != "" {
					if err := tx.bucket(bucketTokenSession).Put(tokenSessionKey(r.Session, r.ID), present); err != nil {
						return err
					}
				}
				continue
			}
			if err := tx.bucket(bucketTokenAge).Delete(tokenDue(&r)); err != nil {
				return err
			}
			if err := tx.bucket(bucketTokens).Delete([]byte(r.ID)); err != nil {
				return err
			}
			if err := tx.putTombstone(r.ID, Tombstone{Generation: r.Generation, Revoked: *r.Revoked}); err != nil {
				return err
			}
		}
	}
	return nil
}
