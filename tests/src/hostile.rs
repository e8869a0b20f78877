//! Hostile job components written in the component text format: valid for
//! the `job` world (they export `init`, `execute` and `destroy` with the
//! world's types and import nothing), but built to take more of the host
//! than a job is given.
//!
//! A toolchain never makes these shapes, so they are written by hand: one
//! core module that implements the world, plus as many filler core
//! instances, each with its own linear memory, as the test asks for.

/// A job component whose `execute` returns `ok("hostile")`, made of
/// `1 + fillers` core instances; each filler owns a linear memory of
/// `filler_pages` 64 KiB pages (no memory when 0).
fn component(fillers: usize, filler_pages: u32) -> Vec<u8> {
    let filler_memory = if filler_pages == 0 {
        String::new()
    } else {
        format!("(memory {filler_pages})")
    };
    let filler_instances: String = (0..fillers)
        .map(|_| "(core instance (instantiate $filler))\n")
        .collect();
    let text = format!(
        r#"(component
  (core module $job
    (memory (export "memory") 1)
    (data (i32.const 2048) "hostile")
    ;; `result<_, string>` and `result<string, string>` are returned
    ;; through a return area: a tag byte, then (pointer, length).
    (func (export "init") (result i32)
      (i32.store8 (i32.const 1024) (i32.const 0))
      (i32.const 1024))
    (func (export "execute") (result i32)
      (i32.store8 (i32.const 1024) (i32.const 0))
      (i32.store (i32.const 1028) (i32.const 2048))
      (i32.store (i32.const 1032) (i32.const 7))
      (i32.const 1024))
    (func (export "destroy")))
  (core module $filler {filler_memory})
  (core instance $main (instantiate $job))
  {filler_instances}
  (func (export "init") (result (result (error string)))
    (canon lift (core func $main "init") (memory (core memory $main "memory"))))
  (func (export "execute") (result (result string (error string)))
    (canon lift (core func $main "execute") (memory (core memory $main "memory"))))
  (func (export "destroy")
    (canon lift (core func $main "destroy"))))"#
    );
    wat::parse_str(&text).expect("the hostile component's text is valid")
}

/// A job component of `count` core instances in all (none with a memory
/// but the first).
pub fn many_core_instances(count: usize) -> Vec<u8> {
    component(count.saturating_sub(1), 0)
}

/// A job component with `count` linear memories of `pages` 64 KiB pages
/// each, besides the small one of the core instance that implements the
/// world.
pub fn many_memories(count: usize, pages: u32) -> Vec<u8> {
    component(count, pages)
}
