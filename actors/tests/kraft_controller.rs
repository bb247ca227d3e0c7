//! The QuorumControllerActor's bookkeeping of where its records land: every answer completes
//! at the offset its records really have in the metadata log, even when the controller hears
//! about its own leadership again (Raft re-sends the notice to a listener that registers
//! again, e.g. after the controller rebuilt itself from the log).

use actix::prelude::*;
use kactor_actors::controller::core::requests::CreatableTopic;
use kactor_actors::controller::{start_kraft, CreateTopics};
use kactor_actors::metadata::wait_for_offset;
use kactor_actors::raft::{DescribeQuorumState, RaftLeaderChanged};

mod common;
use common::kraft::{kraft_config, until_running};

fn topic(name: &str) -> CreatableTopic {
    CreatableTopic {
        name: name.into(),
        num_partitions: 1,
        replication_factor: 1,
        assignments: Vec::new(),
        configs: Vec::new(),
    }
}

#[test]
fn answers_complete_at_the_real_offsets_after_a_repeated_leadership_notice() {
    let dir = tempfile::tempdir().unwrap();
    System::new().block_on(async move {
        let h = start_kraft(&Arbiter::current(), kraft_config(dir.path())).unwrap();
        until_running(&h).await;
        let controller = h.controller.clone().unwrap();
        let create = |name: &str| CreateTopics {
            topics: vec![topic(name)],
            validate_only: false,
        };
        let first = controller.send(create("a")).await.unwrap().unwrap();
        assert_eq!(first.response[0].error.code, 0);

        // The notice for the current epoch again, with its (old) epoch start offset.
        let quorum = h.raft.send(DescribeQuorumState).await.unwrap();
        controller
            .send(RaftLeaderChanged {
                leader_id: Some(1),
                epoch: quorum.leader_epoch,
                next_offset: Some(1),
            })
            .await
            .unwrap();

        let second = controller.send(create("b")).await.unwrap().unwrap();
        assert_eq!(second.response[0].error.code, 0);
        assert!(
            second.offset > first.offset,
            "offsets go backwards: {} then {}",
            first.offset,
            second.offset
        );
        // The answer's offset is where "b" is: once the image reaches it, "b" is there.
        let mut image = h.image.clone();
        assert!(wait_for_offset(&mut image, second.offset).await);
        let img = image.borrow().clone();
        assert!(img.topics.get_by_name("b").is_some());
    });
}
