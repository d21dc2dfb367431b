package rtfs

// get looks key up in a map, vector (int index), string (int index, one
// character) or nil. A missing key or out-of-range index gives nil.
func get(coll, key Value) (Value, bool) {
	switch coll.k {
	case KindMap:
		return coll.AsMap().Get(key)
	case KindVector, KindList:
		if key.k != KindInt {
			return Nil, false
		}
		items := coll.Items()
		i := key.AsInt()
		if i < 0 || i >= int64(len(items)) {
			return Nil, false
		}
		return items[i], true
	}
	return Nil, false
}
