//! A layered layout of a prerequisite graph, left to right, pure: each node gets a rank (the
//! longest chain of prerequisites before it), a place in its rank, and a box; each edge gets an
//! orthogonal route that never crosses a box.
//!
//! Why our own and not `layout-rs`: that crate lays out a DOT graph for its own SVG writer,
//! with its own box sizes and no say in where edges run; what we need is small (graphs of a few
//! to a few dozen nodes, mostly chains) and must be testable on its geometry: ranks, no
//! overlapping boxes, every edge drawn, nothing crossed.
//!
//! Routing: an edge between neighbouring ranks runs in the gap between their columns (out of the
//! source's right side, along the gap, into the target's left side); an edge that skips ranks
//! climbs into a lane of its own above every box, runs along it, and comes down in the gap
//! before its target. Gaps and lanes hold no boxes, so no edge crosses one.

/// A box's width and height, and the spacing around boxes.
pub const BOX_WIDTH: f64 = 156.0;
pub const BOX_HEIGHT: f64 = 58.0;
pub const GAP_X: f64 = 64.0;
pub const GAP_Y: f64 = 22.0;
pub const MARGIN: f64 = 16.0;
/// Vertical distance between the lanes of rank-skipping edges.
pub const LANE: f64 = 12.0;

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Point {
    pub x: f64,
    pub y: f64,
}

/// An axis-aligned box: its top-left corner and size.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rect {
    pub x: f64,
    pub y: f64,
    pub width: f64,
    pub height: f64,
}

#[cfg(test)]
impl Rect {
    pub fn overlaps(&self, other: &Rect) -> bool {
        self.x < other.x + other.width
            && other.x < self.x + self.width
            && self.y < other.y + other.height
            && other.y < self.y + self.height
    }

    /// Whether the axis-aligned segment `a`-`b` passes through the box's inside (its border
    /// does not count: edges start and end on borders).
    pub fn crossed_by(&self, a: Point, b: Point) -> bool {
        let (x0, x1) = (a.x.min(b.x), a.x.max(b.x));
        let (y0, y1) = (a.y.min(b.y), a.y.max(b.y));
        x0 < self.x + self.width && x1 > self.x && y0 < self.y + self.height && y1 > self.y
    }
}

impl Rect {
    pub fn center_y(&self) -> f64 {
        self.y + self.height / 2.0
    }
}

/// The layout of a graph of `n` nodes.
#[derive(Clone, Debug, PartialEq)]
pub struct Layout {
    /// Each node's rank (its column).
    pub ranks: Vec<usize>,
    /// Each node's box.
    pub boxes: Vec<Rect>,
    /// Each edge's route, in the order the edges were given: a polyline from the source's right
    /// side to the target's left side. Empty for an edge the layout cannot draw (an end out of
    /// range, or a node pointing at itself).
    pub routes: Vec<Vec<Point>>,
    pub width: f64,
    pub height: f64,
}

/// Lays out `count` nodes and `edges` (prerequisite, waiting node). `hint` is each node's place
/// in the upgrade order: it orders a rank, and breaks ties. Never panics: edges naming a node
/// out of range are not drawn, and nodes on a cycle are put after everything else.
pub fn layout(count: usize, edges: &[(usize, usize)], hint: &[usize]) -> Layout {
    let ranks = ranks(count, edges.iter().copied().filter(|e| drawable(count, e)));
    let rank_count = ranks.iter().max().map_or(0, |r| r + 1);
    let (columns, row) = place_in_ranks(count, edges, &ranks, rank_count, hint);

    // Edges that skip ranks each get a lane above the boxes.
    let long: Vec<usize> = (0..edges.len())
        .filter(|&i| drawable(count, &edges[i]) && ranks[edges[i].1] > ranks[edges[i].0] + 1)
        .collect();
    let top = MARGIN + LANE * long.len() as f64 + if long.is_empty() { 0.0 } else { LANE };
    let boxes: Vec<Rect> = (0..count)
        .map(|node| Rect {
            x: MARGIN + ranks[node] as f64 * (BOX_WIDTH + GAP_X),
            y: top + row[node] as f64 * (BOX_HEIGHT + GAP_Y),
            width: BOX_WIDTH,
            height: BOX_HEIGHT,
        })
        .collect();
    let router = Router::new(count, edges, &ranks, &boxes, &long, rank_count);
    let routes = (0..edges.len()).map(|i| router.route(i)).collect();

    let rows = columns.iter().map(Vec::len).max().unwrap_or(0);
    // n boxes need n widths and n - 1 gaps.
    let extent = |n: usize, size: f64, gap: f64| (n as f64 * (size + gap) - gap).max(0.0);
    Layout {
        width: MARGIN * 2.0 + extent(rank_count, BOX_WIDTH, GAP_X),
        height: top + extent(rows, BOX_HEIGHT, GAP_Y) + MARGIN,
        ranks,
        boxes,
        routes,
    }
}

/// Whether an edge can be drawn: both ends in range, and not a node pointing at itself.
fn drawable(count: usize, &(from, to): &(usize, usize)) -> bool {
    from < count && to < count && from != to
}

/// Each rank's nodes in order (the columns), and each node's place in its rank (its row): by
/// upgrade order first, then (one barycentre sweep) by where their prerequisites sit, so that
/// edges between neighbouring ranks cross less.
fn place_in_ranks(
    count: usize,
    edges: &[(usize, usize)],
    ranks: &[usize],
    rank_count: usize,
    hint: &[usize],
) -> (Vec<Vec<usize>>, Vec<usize>) {
    let hint_of = |node: usize| hint.get(node).copied().unwrap_or(usize::MAX);
    let mut columns: Vec<Vec<usize>> = vec![Vec::new(); rank_count];
    for node in 0..count {
        columns[ranks[node]].push(node);
    }
    for column in &mut columns {
        column.sort_by_key(|&n| (hint_of(n), n));
    }
    let mut row = vec![0usize; count];
    for column in &columns {
        for (place, &node) in column.iter().enumerate() {
            row[node] = place;
        }
    }
    for column in columns.iter_mut().skip(1) {
        let mut keyed: Vec<(f64, usize, usize)> = column
            .iter()
            .map(|&node| {
                let before: Vec<f64> = edges
                    .iter()
                    .filter(|e| drawable(count, e) && e.1 == node)
                    .map(|&(from, _)| row[from] as f64)
                    .collect();
                let centre = if before.is_empty() {
                    row[node] as f64
                } else {
                    before.iter().sum::<f64>() / before.len() as f64
                };
                (centre, hint_of(node), node)
            })
            .collect();
        keyed.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
        *column = keyed.into_iter().map(|(_, _, node)| node).collect();
        for (place, &node) in column.iter().enumerate() {
            row[node] = place;
        }
    }
    (columns, row)
}

/// Routes edges between placed boxes.
struct Router<'a> {
    count: usize,
    edges: &'a [(usize, usize)],
    ranks: &'a [usize],
    boxes: &'a [Rect],
    /// The edges that skip ranks, each in the lane of its place here.
    long: &'a [usize],
    /// The edges coming down in each rank's gap (the one before its column).
    in_gap: Vec<Vec<usize>>,
}

impl<'a> Router<'a> {
    fn new(
        count: usize,
        edges: &'a [(usize, usize)],
        ranks: &'a [usize],
        boxes: &'a [Rect],
        long: &'a [usize],
        rank_count: usize,
    ) -> Self {
        let mut in_gap: Vec<Vec<usize>> = vec![Vec::new(); rank_count + 1];
        for (i, edge) in edges.iter().enumerate() {
            if drawable(count, edge) && ranks[edge.1] > 0 {
                in_gap[ranks[edge.1]].push(i);
            }
        }
        Router {
            count,
            edges,
            ranks,
            boxes,
            long,
            in_gap,
        }
    }

    /// Where an edge comes down in the gap before its target: edges entering the same gap are
    /// spread across it so their vertical runs stay apart.
    fn gap_x(&self, edge: usize) -> f64 {
        let rank = self.ranks[self.edges[edge].1];
        let sharing = &self.in_gap[rank];
        let place = sharing.iter().position(|&e| e == edge).unwrap_or(0);
        let gap_start = MARGIN + rank as f64 * (BOX_WIDTH + GAP_X) - GAP_X;
        gap_start + GAP_X * (place as f64 + 1.0) / (sharing.len() as f64 + 1.0)
    }

    /// Edge `i`'s route; empty when it is not drawn.
    fn route(&self, i: usize) -> Vec<Point> {
        let edge = &self.edges[i];
        if !drawable(self.count, edge) {
            return Vec::new();
        }
        let (from, to) = (self.boxes[edge.0], self.boxes[edge.1]);
        let start = Point {
            x: from.x + from.width,
            y: from.center_y(),
        };
        let end = Point {
            x: to.x,
            y: to.center_y(),
        };
        let down_x = self.gap_x(i);
        match self.long.iter().position(|&e| e == i) {
            None if self.ranks[edge.1] > self.ranks[edge.0] => vec![
                start,
                Point {
                    x: down_x,
                    y: start.y,
                },
                Point {
                    x: down_x,
                    y: end.y,
                },
                end,
            ],
            // Skipping ranks: up out of the source's gap into its lane, across, and down in
            // the target's gap.
            Some(lane) => {
                let lane_y = MARGIN + LANE * lane as f64;
                let up_x = from.x + from.width + GAP_X / 2.0;
                vec![
                    start,
                    Point {
                        x: up_x,
                        y: start.y,
                    },
                    Point { x: up_x, y: lane_y },
                    Point {
                        x: down_x,
                        y: lane_y,
                    },
                    Point {
                        x: down_x,
                        y: end.y,
                    },
                    end,
                ]
            }
            // Backwards (only on a cycle): not drawn across boxes; left out.
            None => Vec::new(),
        }
    }
}

/// Longest-path ranks (Kahn's order): a node sits one rank after its latest prerequisite.
/// Nodes left on a cycle go after every other.
fn ranks(count: usize, edges: impl Iterator<Item = (usize, usize)> + Clone) -> Vec<usize> {
    let mut incoming = vec![0usize; count];
    let mut outgoing: Vec<Vec<usize>> = vec![Vec::new(); count];
    for (from, to) in edges {
        incoming[to] += 1;
        outgoing[from].push(to);
    }
    let mut rank = vec![0usize; count];
    let mut ready: Vec<usize> = (0..count).filter(|&n| incoming[n] == 0).collect();
    let mut placed = vec![false; count];
    while let Some(node) = ready.pop() {
        placed[node] = true;
        for &next in &outgoing[node] {
            rank[next] = rank[next].max(rank[node] + 1);
            incoming[next] -= 1;
            if incoming[next] == 0 {
                ready.push(next);
            }
        }
    }
    let after = (0..count)
        .filter(|&n| placed[n])
        .map(|n| rank[n] + 1)
        .max()
        .unwrap_or(0);
    for node in 0..count {
        if !placed[node] {
            rank[node] = after;
        }
    }
    rank
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn assert_sound(count: usize, edges: &[(usize, usize)], layout: &Layout) {
        for a in 0..count {
            for b in a + 1..count {
                assert!(
                    !layout.boxes[a].overlaps(&layout.boxes[b]),
                    "boxes {a} and {b} overlap: {:?} {:?}",
                    layout.boxes[a],
                    layout.boxes[b]
                );
            }
        }
        for (i, &(from, to)) in edges.iter().enumerate() {
            let route = &layout.routes[i];
            if layout.ranks[to] <= layout.ranks[from] {
                continue;
            }
            assert!(route.len() >= 2, "edge {from}->{to} is not drawn");
            let (first, last) = (route[0], route[route.len() - 1]);
            let (source, target) = (layout.boxes[from], layout.boxes[to]);
            assert_eq!(
                first.x,
                source.x + source.width,
                "edge {from}->{to} leaves its source"
            );
            assert!(first.y > source.y && first.y < source.y + source.height);
            assert_eq!(last.x, target.x, "edge {from}->{to} reaches its target");
            assert!(last.y > target.y && last.y < target.y + target.height);
            for pair in route.windows(2) {
                assert!(
                    pair[0].x == pair[1].x || pair[0].y == pair[1].y,
                    "edge {from}->{to} runs straight"
                );
                for (node, rect) in layout.boxes.iter().enumerate() {
                    assert!(
                        !rect.crossed_by(pair[0], pair[1]),
                        "edge {from}->{to} crosses the box of node {node}"
                    );
                }
            }
        }
        for rect in &layout.boxes {
            assert!(rect.x >= 0.0 && rect.y >= 0.0);
            assert!(rect.x + rect.width <= layout.width);
            assert!(rect.y + rect.height <= layout.height);
        }
    }

    #[test]
    fn the_default_upgrade_order_is_one_rank_per_step() {
        // Nodes: 0 be, 1 fe1, 2 fe2, 3 fe3; upgrade edges fe1->fe2, fe2->be, be->fe3.
        let edges = [(1, 2), (2, 0), (0, 3)];
        let layout = layout(4, &edges, &[2, 0, 1, 3]);
        assert_eq!(layout.ranks, vec![2, 0, 1, 3]);
        assert_sound(4, &edges, &layout);
        // One row: every box at the same height, left to right in upgrade order.
        assert!(layout.boxes.iter().all(|b| b.y == layout.boxes[0].y));
        assert!(layout.boxes[1].x < layout.boxes[2].x && layout.boxes[0].x < layout.boxes[3].x);
    }

    #[test]
    fn nodes_sharing_a_prerequisite_share_a_rank_without_overlapping() {
        // be first; fe1..fe3 each wait for be only.
        let edges = [(0, 1), (0, 2), (0, 3)];
        let layout = layout(4, &edges, &[0, 1, 2, 3]);
        assert_eq!(layout.ranks, vec![0, 1, 1, 1]);
        assert_sound(4, &edges, &layout);
        let ys: Vec<f64> = (1..4).map(|n| layout.boxes[n].y).collect();
        assert!(
            ys[0] < ys[1] && ys[1] < ys[2],
            "upgrade order top to bottom: {ys:?}"
        );
    }

    #[test]
    fn an_edge_skipping_ranks_runs_above_every_box() {
        // 0 -> 1 -> 2 and 0 -> 2 directly.
        let edges = [(0, 1), (1, 2), (0, 2)];
        let layout = layout(3, &edges, &[0, 1, 2]);
        assert_eq!(layout.ranks, vec![0, 1, 2]);
        assert_sound(3, &edges, &layout);
        let lane = &layout.routes[2];
        assert_eq!(lane.len(), 6);
        assert!(lane[2].y < layout.boxes.iter().map(|b| b.y).fold(f64::MAX, f64::min));
    }

    #[test]
    fn thirty_nodes_in_a_chain_stay_apart_and_every_edge_is_drawn() {
        let edges: Vec<(usize, usize)> = (0..29).map(|n| (n, n + 1)).collect();
        let hint: Vec<usize> = (0..30).collect();
        let layout = layout(30, &edges, &hint);
        assert_eq!(layout.ranks, hint);
        assert_sound(30, &edges, &layout);
        // Readable: boxes keep their size however many nodes there are.
        assert!(
            layout
                .boxes
                .iter()
                .all(|b| b.width == BOX_WIDTH && b.height == BOX_HEIGHT)
        );
    }

    #[test]
    fn thirty_nodes_with_explicit_prerequisites_stay_apart() {
        // A backend, then 29 frontends in three waves of explicit prerequisites, plus a few
        // edges that skip waves.
        let mut edges: Vec<(usize, usize)> =
            (1..30usize).map(|n| (n.saturating_sub(10), n)).collect();
        edges.extend([(0, 25), (3, 29), (1, 21)]);
        let hint: Vec<usize> = (0..30).collect();
        let layout = layout(30, &edges, &hint);
        assert_sound(30, &edges, &layout);
        assert_eq!(layout.ranks[0], 0);
        assert_eq!(layout.ranks[5], 1);
        assert_eq!(layout.ranks[15], 2);
        assert_eq!(layout.ranks[25], 3);
    }

    #[test]
    fn a_cycle_or_a_bad_edge_is_laid_out_without_panicking() {
        let edges = [(0, 1), (1, 0), (2, 9), (2, 2)];
        let layout = layout(3, &edges, &[]);
        assert_eq!(layout.boxes.len(), 3);
        assert!(layout.routes[2].is_empty() && layout.routes[3].is_empty());
        assert_eq!(layout.ranks[2], 0);
        assert!(
            layout.ranks[0] > 0 && layout.ranks[1] > 0,
            "nodes on a cycle go last"
        );
    }

    #[test]
    fn an_empty_graph_has_an_empty_layout() {
        let layout = layout(0, &[], &[]);
        assert!(layout.boxes.is_empty());
        assert!(layout.width >= 0.0 && layout.height >= 0.0);
    }

    proptest! {
        #[test]
        fn any_acyclic_graph_is_laid_out_soundly(
            count in 1usize..31,
            raw in proptest::collection::vec((0usize..30, 0usize..30), 0..60),
        ) {
            // Acyclic: every edge points from a lower to a higher index.
            let edges: Vec<(usize, usize)> = raw
                .into_iter()
                .map(|(a, b)| (a % count, b % count))
                .filter(|(a, b)| a < b)
                .collect();
            let hint: Vec<usize> = (0..count).rev().collect();
            let layout = layout(count, &edges, &hint);
            for &(from, to) in &edges {
                prop_assert!(layout.ranks[to] > layout.ranks[from]);
            }
            assert_sound(count, &edges, &layout);
        }
    }
}
