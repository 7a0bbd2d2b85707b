//! Steps from other sources: the minimal step format and other agents' trajectories,
//! converted to [`crate::StepView`]s for the detector (`agentforge inspect loops`).
