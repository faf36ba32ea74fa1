//! The sampler's frame and stack tables: a frame or a stack gets an id the first time it is seen,
//! and the batch being collected gets the new ones, with each frame's instruction positions.

use crate::interp::frames::Frame;
use crate::interp::linetable::Position;
use crate::sampling::classify::ThreadState;
use crate::sampling::positions::PositionTally;
use std::collections::HashMap;
use std::sync::Arc;

/// A stack as read and interned: its id in this sampler's tables and its frames.
#[derive(Clone)]
pub(crate) struct Stack {
    pub id: u32,
    pub frames: Arc<Vec<Frame>>,
    /// Per frame, the outermost of its evaluation-loop call (kept for `record --native` only).
    pub ends: Arc<Vec<bool>>,
}

/// One thread in one pass: (tid, state, syscall number or -1, stack unless absent or torn, holds
/// the GIL, handling an exception: None when not read).
pub(crate) type Observed = (i32, ThreadState, i64, Option<Stack>, bool, Option<bool>);

#[derive(Default)]
pub(crate) struct Interner {
    frame_ids: HashMap<Frame, u32>,
    stack_ids: HashMap<Vec<u32>, u32>,
    positions: PositionTally,
    /// Frames and stacks first seen since the last `take`.
    new_frames: Vec<(u32, Frame)>,
    new_stacks: Vec<(u32, Vec<u32>)>,
}

/// What the tables gained since the last `take`: (new stacks, new frames, positions).
pub(crate) type Gained = (
    Vec<(u32, Vec<u32>)>,
    Vec<(u32, Frame)>,
    Vec<(u32, Position, u64)>,
);

impl Interner {
    /// The id of a frame already interned.
    pub fn frame_id(&self, f: &Frame) -> Option<u32> {
        self.frame_ids.get(f).copied()
    }

    pub fn frame(&mut self, f: &Frame) -> u32 {
        if let Some(&id) = self.frame_ids.get(f) {
            return id;
        }
        let id = self.frame_ids.len() as u32;
        self.frame_ids.insert(f.clone(), id);
        self.new_frames.push((id, f.clone()));
        id
    }

    /// The stack's id; counts each frame's position (`positions`, by frame, where known).
    pub fn stack(&mut self, frames: &[Frame], positions: &[Option<Position>]) -> u32 {
        let mut ids = Vec::with_capacity(frames.len());
        for (i, f) in frames.iter().enumerate() {
            let id = self.frame(f);
            // An instruction without a location (no end line) says nothing beyond the frame's line.
            if let Some(Some(p)) = positions
                .get(i)
                .filter(|p| p.is_some_and(|p| p.end_line.is_some()))
            {
                self.positions.add(id, *p);
            }
            ids.push(id);
        }
        if let Some(&id) = self.stack_ids.get(&ids) {
            return id;
        }
        let id = self.stack_ids.len() as u32;
        self.stack_ids.insert(ids.clone(), id);
        self.new_stacks.push((id, ids));
        id
    }

    /// The stacks, frames and positions gained since the last call.
    pub fn take(&mut self) -> Gained {
        (
            std::mem::take(&mut self.new_stacks),
            std::mem::take(&mut self.new_frames),
            self.positions.take(),
        )
    }
}
