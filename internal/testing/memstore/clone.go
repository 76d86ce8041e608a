package memstore

import "reflect"

// clone deep-copies v through its exported pointers, slices and maps, so a
// caller that changes what the store returned (or what it handed the store)
// never changes the stored row, as with a real database. Unexported fields
// are copied by value: the ones reached here (decimal.Decimal's big.Int,
// time.Time's location) are never mutated in place.
func clone[T any](v T) T {
	rv := reflect.ValueOf(&v).Elem()
	out := reflect.New(rv.Type()).Elem()
	deep(out, rv)
	return out.Interface().(T)
}

func deep(dst, src reflect.Value) {
	switch src.Kind() {
	case reflect.Pointer:
		if src.IsNil() {
			return
		}
		p := reflect.New(src.Type().Elem())
		deep(p.Elem(), src.Elem())
		dst.Set(p)
	case reflect.Slice:
		if src.IsNil() {
			return
		}
		s := reflect.MakeSlice(src.Type(), src.Len(), src.Len())
		for i := range src.Len() {
			deep(s.Index(i), src.Index(i))
		}
		dst.Set(s)
	case reflect.Map:
		if src.IsNil() {
			return
		}
		m := reflect.MakeMapWithSize(src.Type(), src.Len())
		for it := src.MapRange(); it.Next(); {
			v := reflect.New(src.Type().Elem()).Elem()
			deep(v, it.Value())
			m.SetMapIndex(it.Key(), v)
		}
		dst.Set(m)
	case reflect.Struct:
		dst.Set(src) // unexported fields by value
		for i := range src.NumField() {
			if src.Type().Field(i).IsExported() {
				deep(dst.Field(i), src.Field(i))
			}
		}
	default:
		dst.Set(src)
	}
}
