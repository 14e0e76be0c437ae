DROP TRIGGER IF EXISTS `app`.`posts_sf_id`;

CREATE TRIGGER `app`.`posts_sf_id`
BEFORE INSERT ON `app`.`posts` FOR EACH ROW
BEGIN
  IF NEW.`id` IS NULL OR NEW.`id` = 0 THEN
    SET NEW.`id` = `shard_5`.`next_id`();
  END IF;
END;

CREATE DATABASE IF NOT EXISTS `tickets`;

CREATE TABLE IF NOT EXISTS `tickets`.`tickets64_photos` (
  `stub` CHAR(1) NOT NULL PRIMARY KEY,
  `id` BIGINT UNSIGNED NOT NULL COMMENT 'next ticket of this server'
) ENGINE=InnoDB;

DROP FUNCTION IF EXISTS `tickets`.`next_photos`;

CREATE FUNCTION `tickets`.`next_photos`(n INT, step INT, start INT) RETURNS BIGINT UNSIGNED
  NOT DETERMINISTIC MODIFIES SQL DATA
  COMMENT 'shardflake ticket server: n tickets in one single-row UPDATE, returns the first'
BEGIN
  DECLARE inc BIGINT UNSIGNED DEFAULT COALESCE(step, @@auto_increment_increment);
  DECLARE off BIGINT UNSIGNED DEFAULT COALESCE(start, @@auto_increment_offset);
  IF n IS NULL OR n < 1 OR n > 1000000 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'shardflake:COUNT: n must be from 1 to 1000000';
  END IF;
  UPDATE `tickets`.`tickets64_photos` SET `id` = LAST_INSERT_ID(`id` + inc * n)
   WHERE `stub` = 'a' AND MOD(`id`, inc) = MOD(off, inc);
  IF ROW_COUNT() <> 1 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'shardflake:TICKETS: no ticket row for this increment and offset';
  END IF;
  RETURN LAST_INSERT_ID() - inc * n;
END;
