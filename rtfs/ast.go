package rtfs

import "fmt"

// Pos is a 1-based line and column (columns count characters, not bytes).
type Pos struct {
	Line int
	Col  int
}

func (p Pos) String() string { return fmt.Sprintf("%d:%d", p.Line, p.Col) }

// NodeKind classifies syntax nodes.
type NodeKind uint8

// Node kinds. Atom nodes carry their literal in Val.
const (
	NodeAtom   NodeKind = iota // nil, booleans, numbers, strings, keywords, regexes
	NodeSymbol                 // a symbol; Val holds it
	NodeList                   // (…)
	NodeVector                 // […]
	NodeMap                    // {…}: Items alternate key, value
	NodeQuote                  // 'x: Items[0] is x
	NodeSet                    // #{…}
)

// Node is one form of source text with its position. Meta is the metadata
// form (always a map node) written before it with ^, or nil.
type Node struct {
	Kind  NodeKind
	Pos   Pos
	End   Pos // position of the closing delimiter for collections
	Val   Value
	Items []*Node
	Meta  *Node
}

// IsSymbol reports whether n is the symbol name.
func (n *Node) IsSymbol(name string) bool {
	return n != nil && n.Kind == NodeSymbol && n.Val.Str() == name
}

// IsLiteral reports whether n is constant data: atoms, quoted forms, and
// vectors, maps and sets of them (no symbols or calls).
func (n *Node) IsLiteral() bool {
	switch n.Kind {
	case NodeAtom, NodeQuote:
		return true
	case NodeVector, NodeMap, NodeSet:
		for _, it := range n.Items {
			if !it.IsLiteral() {
				return false
			}
		}
		return true
	}
	return false
}

// Head returns the symbol name at the head of a list node, or "".
func (n *Node) Head() string {
	if n == nil || n.Kind != NodeList || len(n.Items) == 0 || n.Items[0].Kind != NodeSymbol {
		return ""
	}
	return n.Items[0].Val.Str()
}

// Value converts the node to the data value it denotes, as quote does:
// symbols stay symbols and lists stay lists. Metadata is dropped.
func (n *Node) Value() Value {
	switch n.Kind {
	case NodeAtom, NodeSymbol:
		return n.Val
	case NodeList, NodeVector:
		items := make([]Value, len(n.Items))
		for i, it := range n.Items {
			items[i] = it.Value()
		}
		if n.Kind == NodeList {
			return List(items)
		}
		return Vector(items)
	case NodeMap:
		b := NewMapBuilder(len(n.Items) / 2)
		for i := 0; i+1 < len(n.Items); i += 2 {
			b.Set(n.Items[i].Value(), n.Items[i+1].Value())
		}
		return MapValue(b.Map())
	case NodeQuote:
		return List([]Value{Symbol("quote"), n.Items[0].Value()})
	case NodeSet:
		items := make([]Value, len(n.Items))
		for i, it := range n.Items {
			items[i] = it.Value()
		}
		return SetValue(NewSet(items...))
	}
	return Nil
}
