//! Where in its line each sampled frame stood: walks per (frame id, instruction position), kept
//! beside the frame table so that stacks differing only in a column stay one stack.
//!
//! Counted in the hot loop for every frame of every walked stack, so without hashing: frame ids are
//! dense (the sampler numbers them from 0), and one frame is seen at very few instructions (usually
//! one), so each frame id has a short list searched linearly.

use crate::interp::linetable::Position;

#[derive(Debug, Default)]
pub struct PositionTally {
    /// By frame id: (position, walks) since the last `take`.
    by_frame: Vec<Vec<(Position, u64)>>,
    /// Frame ids with a non-empty list, in first-touched order.
    touched: Vec<u32>,
}

impl PositionTally {
    pub fn add(&mut self, frame: u32, position: Position) {
        let i = frame as usize;
        if i >= self.by_frame.len() {
            self.by_frame.resize_with(i + 1, Vec::new);
        }
        let seen = &mut self.by_frame[i];
        if seen.is_empty() {
            self.touched.push(frame);
        }
        match seen.iter_mut().find(|(p, _)| *p == position) {
            Some((_, n)) => *n += 1,
            None => seen.push((position, 1)),
        }
    }

    /// Everything counted since the last call, as (frame id, position, walks), and starts afresh.
    pub fn take(&mut self) -> Vec<(u32, Position, u64)> {
        let mut out = Vec::new();
        for frame in self.touched.drain(..) {
            out.extend(
                self.by_frame[frame as usize]
                    .drain(..)
                    .map(|(p, n)| (frame, p, n)),
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(line: i32, column: i32) -> Position {
        Position {
            line,
            end_line: Some(line),
            column: Some(column),
            end_column: Some(column + 4),
        }
    }

    #[test]
    fn counts_per_frame_and_position_and_starts_afresh() {
        let mut t = PositionTally::default();
        t.add(3, at(10, 4));
        t.add(0, at(2, 0));
        t.add(3, at(10, 4));
        t.add(3, at(10, 12));
        assert_eq!(
            t.take(),
            vec![(3, at(10, 4), 2), (3, at(10, 12), 1), (0, at(2, 0), 1)]
        );
        assert_eq!(t.take(), vec![]);
        t.add(0, at(2, 0));
        assert_eq!(t.take(), vec![(0, at(2, 0), 1)]);
    }
}
