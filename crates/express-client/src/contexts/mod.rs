//! Several DCs (DESIGN section 13): selecting contexts from the kubeconfig ([`select`]) and
//! reading them in parallel under a deadline ([`across`]).

pub mod across;
pub mod select;
