//! What the operator holds in memory, published beside its RSS so that retention shows: the
//! objects each cache holds, the entries of every other long-lived structure (its overlays of
//! its own writes, the event recorders still holding events, the interned strings) and, when
//! the binary's allocator can say, the live heap and how often the caches were repacked.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabel {
    pub kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StructureLabel {
    pub structure: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HeapLabel {
    pub allocator: String,
    /// `allocated` (live objects), `resident` (pages the allocator holds), `retained`
    /// (address space kept but given back to the OS).
    pub state: String,
}

#[derive(Default)]
pub struct MemoryGauges {
    pub cached_objects: Family<KindLabel, Gauge>,
    pub entries: Family<StructureLabel, Gauge>,
    pub heap_bytes: Family<HeapLabel, Gauge>,
    /// Times the caches were copied into fresh allocations after a burst (`controller::compact`).
    pub repacks: Counter,
}

impl MemoryGauges {
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "cached_objects",
            "Objects the operator's caches hold, by kind (nodes, pods and ControllerRevisions as views)",
            self.cached_objects.clone(),
        );
        registry.register(
            "memory_entries",
            "Entries of the operator's other long-lived structures, by structure",
            self.entries.clone(),
        );
        registry.register(
            "heap_bytes",
            "The operator's heap as its allocator reports it, by state",
            self.heap_bytes.clone(),
        );
        registry.register(
            "heap_repacks",
            "Times the caches were copied into fresh allocations because the allocator kept far more resident than the heap used",
            self.repacks.clone(),
        );
    }

    pub fn set_cached(&self, kind: &str, objects: usize) {
        self.cached_objects
            .get_or_create(&KindLabel { kind: kind.into() })
            .set(i64::try_from(objects).unwrap_or(i64::MAX));
    }

    pub fn set_entries(&self, structure: &str, entries: usize) {
        self.entries
            .get_or_create(&StructureLabel {
                structure: structure.into(),
            })
            .set(i64::try_from(entries).unwrap_or(i64::MAX));
    }

    pub fn set_heap(&self, allocator: &str, state: &str, bytes: u64) {
        self.heap_bytes
            .get_or_create(&HeapLabel {
                allocator: allocator.into(),
                state: state.into(),
            })
            .set(i64::try_from(bytes).unwrap_or(i64::MAX));
    }
}
